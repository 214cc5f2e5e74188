"""A stand-in for torch, just enough for the benchmark's worker to start without a GPU. Used only by
bench/tests/test_orchestration.py (which puts this folder first on PYTHONPATH); the measurements
themselves are faked by the sitecustomize.py beside it."""
import types

__version__ = "0.0-stub"


class _Props:
    name = "NVIDIA H100 80GB HBM3"
    multi_processor_count = 132
    major, minor = 9, 0
    total_memory = 80 << 30
    uuid = "stub"


class _Tensor:
    def zero_(self):
        return self

    def __add__(self, other):
        return self

    def item(self):
        return 2.0


class OutOfMemoryError(RuntimeError):
    pass


cuda = types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError, is_available=lambda: True,
                             get_device_properties=lambda i: _Props(), get_device_name=lambda i: _Props.name,
                             synchronize=lambda: None, empty_cache=lambda: None)
backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(version=lambda: 91900))
version = types.SimpleNamespace(cuda="13.0")
int32 = "int32"


def empty(*args, **kwargs):
    return _Tensor()


def ones(*args, **kwargs):
    return _Tensor()
