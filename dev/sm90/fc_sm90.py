"""ctypes wrapper over libfc_sm90.so (dev harness): flashcore's sm90 forward on torch tensors."""
import ctypes
import math
import os

import torch

_LIB = ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.environ.get("FC_LIB", "libfc_sm90.so")))
_LIB.fc_sm90_fwd.restype = ctypes.c_int
_LIB.fc_sm90_fwd.argtypes = [ctypes.c_int, ctypes.c_int] + [ctypes.c_void_p] * 4 + [
    ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)] + [ctypes.c_int] * 6 + [
    ctypes.c_float, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]

KERNEL_DIMS = (64, 96, 128, 192, 256)
_SM_COUNT = None


def kernel_dim(d):
    return next(k for k in KERNEL_DIMS if k >= d)


VARIANT = int(os.environ.get("VARIANT", "-1"))  # >= 0: a dev variant of libfc_sm90_exp.so


def forward(q, k, v, causal, out=None, lse=None, scale=None):
    """q (B, Sq, Hq, D), k/v (B, Sk, Hkv, D), any strides with a contiguous last dim.
    out (B, Sq, Hq, D) and lse (B, Hq, Sq) float32 may be given (views allowed)."""
    global _SM_COUNT
    if _SM_COUNT is None:
        _SM_COUNT = torch.cuda.get_device_properties(q.device).multi_processor_count
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    if out is None:
        out = torch.empty_like(q)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    strides = []
    for t in (q, k, v, out):
        assert t.stride(-1) == 1
        strides += [t.stride(0), t.stride(1), t.stride(2)]
    strides += [lse.stride(0), lse.stride(1)] if lse is not None else [0, 0]
    if lse is not None:
        assert lse.stride(2) == 1
    arr = (ctypes.c_int64 * 14)(*strides)
    err = ctypes.create_string_buffer(512)
    rc = _LIB.fc_sm90_fwd(int(q.dtype == torch.bfloat16), 1000 + VARIANT if VARIANT >= 0 else kernel_dim(d), q.data_ptr(), k.data_ptr(), v.data_ptr(),
                          out.data_ptr(), lse.data_ptr() if lse is not None else None, arr, b, hq, hkv, sq, sk, d,
                          scale, int(causal), _SM_COUNT, torch.cuda.current_stream().cuda_stream, err, 512)
    if rc != 0:
        raise RuntimeError(err.value.decode())
    return out, lse
