"""Loads libflashcore_c (the C ABI of include/flashcore/c_api.h) with ctypes.

The package talks to flashcore only through this C ABI, never through PyTorch's C++ ABI, so one
build of the library serves every PyTorch version. Function pointers and their argument types are
bound once here; a call then costs one ctypes transition.
"""

import ctypes
import os
import pathlib
import struct

MAX_RANK = 4
ABI_VERSION = 5  # FLASHCORE_C_ABI_VERSION this binding was written for

# flashcore_tensor.dtype / .device codes and the backend codes (c_api.h).
DTYPE_FLOAT16, DTYPE_BFLOAT16, DTYPE_FLOAT32, DTYPE_INT32 = 0, 1, 2, 3
DEVICE_CPU, DEVICE_CUDA = 0, 1
BACKEND_AUTO, BACKEND_CPU, BACKEND_CPU_REFERENCE, BACKEND_CUDA = 0, 1, 2, 3
# flashcore_options.kernels: the GPU kernel family (auto, or forced).
KERNELS_AUTO, KERNELS_SM80, KERNELS_SM90 = 0, 1, 2
KERNEL_FAMILY_NAMES = {KERNELS_AUTO: "auto", KERNELS_SM80: "sm80", KERNELS_SM90: "sm90"}

STATUS_OK = 0
STATUS_INVALID_ARGUMENT = 1
STATUS_NOT_SUPPORTED = 2

# FLASHCORE_LIBRARY points at a libflashcore_c.so of a development build and wins over the copy
# installed inside the package.
LIBRARY_ENV = "FLASHCORE_LIBRARY"
LIBRARY_NAME = "libflashcore_c.so"


class CTensor(ctypes.Structure):
    """flashcore_tensor: a strided view of caller-owned memory (strides in elements)."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_RANK),
        ("stride", ctypes.c_int64 * MAX_RANK),
    ]


class COptions(ctypes.Structure):
    """flashcore_options: a call's options, its own size first (c_api.h)."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("has_softmax_scale", ctypes.c_int32),
        ("softmax_scale", ctypes.c_float),
        ("causal", ctypes.c_int32),
        ("deterministic", ctypes.c_int32),
        ("backend", ctypes.c_int32),
        ("kernels", ctypes.c_int32),
        ("num_threads", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("window_left", ctypes.c_int64),
        ("window_right", ctypes.c_int64),
        ("softcap", ctypes.c_float),
        ("alibi_slopes", ctypes.c_void_p),  # a flashcore_tensor's address, or NULL
        ("cu_seqlens_q", ctypes.c_void_p),  # flashcore_tensor addresses, or NULL (dense layout)
        ("cu_seqlens_k", ctypes.c_void_p),
        ("max_seqlen_q", ctypes.c_int64),
        ("max_seqlen_k", ctypes.c_int64),
        ("dropout_p", ctypes.c_float),
        ("dropout_seed", ctypes.c_uint64),
        ("dropout_offset", ctypes.c_uint32),
        ("block_table", ctypes.c_void_p),  # a flashcore_tensor's address, or NULL (k, v not paged)
    ]


_OPTIONS_SIZE = ctypes.sizeof(COptions)

# COptions as a struct-module format (native alignment, as the C compiler lays the struct out;
# "0Q" pads the end to 8 bytes), so a call can pack its options together with its tensor
# descriptors in one struct.pack (_tensors.pack_forward_dense) instead of building a COptions field by field.
_STRUCT_CODES = {ctypes.c_size_t: "Q", ctypes.c_int32: "i", ctypes.c_float: "f", ctypes.c_void_p: "Q",
                 ctypes.c_int64: "q", ctypes.c_uint64: "Q", ctypes.c_uint32: "I"}
OPTIONS_FORMAT = "".join(_STRUCT_CODES[ctype] for _, ctype in COptions._fields_) + "0Q"
assert struct.calcsize("@" + OPTIONS_FORMAT) == _OPTIONS_SIZE
OPTIONS_WORKSPACE_OFFSET = COptions.workspace.offset  # workspace, then workspace_bytes
assert COptions.workspace_bytes.offset == OPTIONS_WORKSPACE_OFFSET + 8


def option_values(softmax_scale, causal=False, deterministic=False, num_threads=0, stream=None):
    """COptions' fields in order, as OPTIONS_FORMAT packs them, for a call with no score option,
    dropout or packed sequences (the common case; options() builds any other)."""
    return (_OPTIONS_SIZE, 1, softmax_scale, causal, deterministic, BACKEND_AUTO, KERNELS_AUTO, num_threads,
            stream or 0, 0, 0, -1, -1, 0.0, 0, 0, 0, 0, 0, 0.0, 0, 0, 0)


def options(softmax_scale, causal=False, deterministic=False, backend=BACKEND_AUTO, kernels=KERNELS_AUTO,
            num_threads=0, stream=None, workspace=None, workspace_bytes=0, window_left=-1, window_right=-1,
            softcap=0.0, alibi_slopes=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0,
            dropout_p=0.0, dropout_seed=0, dropout_offset=0, block_table=None):
    """A COptions for one call (softmax_scale None: the library's default 1/sqrt(head_dim));
    alibi_slopes, cu_seqlens_q/k and block_table are addresses of flashcore_tensor descriptors (see
    _tensors.pack) or None."""
    return COptions(_OPTIONS_SIZE, softmax_scale is not None, 0.0 if softmax_scale is None else softmax_scale, causal,
                    deterministic, backend, kernels, num_threads, stream, workspace, workspace_bytes, window_left,
                    window_right, softcap, alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                    dropout_p, dropout_seed, dropout_offset, block_table)


class CKvCacheOptions(ctypes.Structure):
    """flashcore_kvcache_options: forward_kvcache's own options, its size first (c_api.h)."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("rotary_interleaved", ctypes.c_int32),
        ("num_splits", ctypes.c_int32),
        ("check_indices", ctypes.c_int32),
    ]


def kvcache_options(rotary_interleaved=True, num_splits=0, check_indices=True):
    return CKvCacheOptions(ctypes.sizeof(CKvCacheOptions), bool(rotary_interleaved), num_splits, bool(check_indices))


def _library_path():
    override = os.environ.get(LIBRARY_ENV)
    if override:
        return pathlib.Path(override).resolve()
    return pathlib.Path(__file__).resolve().parent / LIBRARY_NAME


def _load():
    path = _library_path()
    if not path.is_file():
        raise ImportError(
            f"flashcore: the native library {path} is missing. Install the package with "
            f"`pip install ./python` (which builds it), or set {LIBRARY_ENV} to a built "
            f"{LIBRARY_NAME} (e.g. build/<preset>/src/c_api/{LIBRARY_NAME})."
        )
    lib = ctypes.CDLL(str(path))
    lib.flashcore_c_abi_version.argtypes = []
    lib.flashcore_c_abi_version.restype = ctypes.c_int
    found = lib.flashcore_c_abi_version()
    if found != ABI_VERSION:
        raise ImportError(
            f"flashcore: {path} implements C ABI version {found}, this package needs version {ABI_VERSION}; "
            "reinstall the package so the library and the Python code come from the same source"
        )
    return path, lib


LIBRARY_PATH, _lib = _load()

# Descriptors travel as addresses (see _tensors.pack); CTensor documents and checks their layout.
_T = ctypes.c_void_p

_lib.flashcore_version.argtypes = []
_lib.flashcore_version.restype = ctypes.c_char_p
_lib.flashcore_built_with_cuda.argtypes = []
_lib.flashcore_built_with_cuda.restype = ctypes.c_int
_lib.flashcore_kernel_families.argtypes = []
_lib.flashcore_kernel_families.restype = ctypes.c_char_p
_lib.flashcore_cuda_architectures.argtypes = []
_lib.flashcore_cuda_architectures.restype = ctypes.c_char_p
_lib.flashcore_cuda_version.argtypes = []
_lib.flashcore_cuda_version.restype = ctypes.c_char_p
_lib.flashcore_last_error.argtypes = []
_lib.flashcore_last_error.restype = ctypes.c_char_p

_O = ctypes.POINTER(COptions)
# forward, backward and backward_workspace_size take the options as an address too: a packed
# buffer's (_tensors.pack_forward_dense) or ctypes.byref(COptions).
_OA = ctypes.c_void_p

forward = _lib.flashcore_forward
forward.argtypes = [_T] * 5 + [_OA]
forward.restype = ctypes.c_int

backward_workspace_size = _lib.flashcore_backward_workspace_size
backward_workspace_size.argtypes = [_T] * 9 + [_OA, ctypes.POINTER(ctypes.c_size_t)]
backward_workspace_size.restype = ctypes.c_int

backward = _lib.flashcore_backward
backward.argtypes = [_T] * 9 + [_OA]
backward.restype = ctypes.c_int

selected_kernels = _lib.flashcore_selected_kernels
selected_kernels.argtypes = [_T] * 9 + [ctypes.c_int, _O, ctypes.POINTER(ctypes.c_int32)]
selected_kernels.restype = ctypes.c_int

merge_partials = _lib.flashcore_merge_partials
merge_partials.argtypes = [_T] * 6 + [_O]
merge_partials.restype = ctypes.c_int


# flashcore_forward_kvcache: absent from libraries built before it (None then; the Python function
# says so when called).
forward_kvcache = getattr(_lib, "flashcore_forward_kvcache", None)
if forward_kvcache is not None:
    forward_kvcache.argtypes = [_T] * 13 + [_O, ctypes.POINTER(CKvCacheOptions)]
    forward_kvcache.restype = ctypes.c_int


# flashcore_cpu_use_openmp: absent from libraries built before it (None then: the CPU backend keeps
# its own thread pool; _threads.py).
cpu_use_openmp = getattr(_lib, "flashcore_cpu_use_openmp", None)
if cpu_use_openmp is not None:
    cpu_use_openmp.argtypes = [ctypes.c_char_p]
    cpu_use_openmp.restype = ctypes.c_int


def version():
    return _lib.flashcore_version().decode()


def built_with_cuda():
    return bool(_lib.flashcore_built_with_cuda())


def kernel_families():
    """The GPU kernel families this build holds, e.g. ("sm80", "sm90"); () for a CPU-only build."""
    return tuple(_lib.flashcore_kernel_families().decode().split())


def build_info():
    """What the loaded library holds: version, CUDA backend, kernel families and their GPU code, the
    CUDA toolkit that built it, and the library's path."""
    return {
        "version": version(),
        "with_cuda": built_with_cuda(),
        "kernel_families": kernel_families(),
        "cuda_architectures": _lib.flashcore_cuda_architectures().decode(),
        "cuda_version": _lib.flashcore_cuda_version().decode(),
        "library": str(LIBRARY_PATH),
    }


def last_error():
    return _lib.flashcore_last_error().decode(errors="replace")


class ArgumentError(ValueError, RuntimeError):
    """An argument flashcore rejects; the message names it. A ValueError, as Python's convention
    has it, and a RuntimeError too, because flash_attn raises RuntimeError for bad arguments (its
    C++ checks) and drop-in callers catch that (`except RuntimeError`)."""


def check(status):
    """Raises the Python exception for a flashcore status code, with the library's message (which
    names the offending argument): ArgumentError for an invalid argument, NotImplementedError for a
    valid request this build or device cannot serve, RuntimeError otherwise."""
    if status == STATUS_OK:
        return
    message = last_error()
    if status == STATUS_INVALID_ARGUMENT:
        raise ArgumentError(message)
    if status == STATUS_NOT_SUPPORTED:
        raise NotImplementedError(message)
    raise RuntimeError(message)
