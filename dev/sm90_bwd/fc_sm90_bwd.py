"""ctypes wrapper over libfc_sm90_bwd.so (dev harness): flashcore's sm90 backward on torch tensors."""
import ctypes
import math
import os

import torch

def open_library(name):
    """A harness library of this folder (a second one, e.g. the base of an A/B, can be timed in the
    same process: backward(..., lib=open_library("libfc_base.so")))."""
    lib = ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(__file__)), name))
    lib.fc_sm90_bwd_workspace_size.restype = ctypes.c_int64
    lib.fc_sm90_bwd_workspace_size.argtypes = [ctypes.c_int] * 9
    if hasattr(lib, "fc_sm90_bwd_set_options"):
        lib.fc_sm90_bwd_set_options.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_void_p,
                                                ctypes.c_int64]
    lib.fc_sm90_bwd.restype = ctypes.c_int
    lib.fc_sm90_bwd.argtypes = [ctypes.c_int, ctypes.c_int] + [ctypes.c_void_p] * 9 + [
        ctypes.POINTER(ctypes.c_int64)] + [ctypes.c_int] * 6 + [
        ctypes.c_float, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p,
        ctypes.c_int]
    return lib


_LIB = open_library(os.environ.get("FC_LIB", "libfc_sm90_bwd.so"))
_SM_COUNT = None
_OPTIONS = False  # set_options() gave an option: the d128 score-option kernels run (and plan the workspace)


def force_kv_splits(splits):
    """0: the launcher's rule; 1, 2 or 4: that many CTAs per kv head's group (a library built
    before session 9 has no such switch: then only 0 is accepted)."""
    if hasattr(_LIB, "fc_sm90_bwd_force_kv_splits"):
        _LIB.fc_sm90_bwd_force_kv_splits(int(splits))
    elif splits:
        raise RuntimeError("this libfc_sm90_bwd.so cannot force kv splits")


def set_options(window_left=-1, window_right=-1, softcap=0.0, alibi_slopes=None):
    """Score options for the calls that follow (the score-option kernels, capi.cu); no arguments:
    none. alibi_slopes: float32 (heads_q,) or (batch, heads_q), kept alive by the caller."""
    global _OPTIONS
    _OPTIONS = window_left >= 0 or window_right >= 0 or softcap > 0 or alibi_slopes is not None
    ptr, stride = None, 0
    if alibi_slopes is not None:
        assert alibi_slopes.dtype == torch.float32 and alibi_slopes.is_contiguous()
        ptr, stride = alibi_slopes.data_ptr(), (alibi_slopes.shape[-1] if alibi_slopes.dim() == 2 else 0)
    _LIB.fc_sm90_bwd_set_options(int(window_left), int(window_right), ctypes.c_float(softcap), ctypes.c_void_p(ptr),
                                 ctypes.c_int64(stride))


def force_l2_section(section):
    """0: the launcher's rule; n >= 1: n (batch, kv head) units per L2 section of the d256 causal
    order (bwd_tile_order.h)."""
    _LIB.fc_sm90_bwd_force_l2_section(int(section))


if os.environ.get("FORCE_L2_SECTION"):  # check.py / san.py: every call with this section
    force_l2_section(int(os.environ["FORCE_L2_SECTION"]))

KERNEL_DIMS = (64, 96, 128, 256)


def kernel_dim(d):
    return next(k for k in KERNEL_DIMS if k >= d)


POISON_WS = bool(os.environ.get("POISON_WS"))  # check.py: dq_accum must be zeroed by the pass itself
VARIANT = int(os.environ.get("VARIANT", "-1"))  # >= 0: a dev variant (variants.cu): 8, 9 at d256, 10 at d128


def backward(dout, q, k, v, out, lse, causal, dq, dk, dv, scale=None, deterministic=False, variant=None, lib=None):
    """q/out/dout/dq (B, Sq, Hq, D), k/v/dk/dv (B, Sk, Hkv, D), lse (B, Hq, Sq) float32 (natural
    log); any strides with a contiguous last dim. lib: another open_library() than FC_LIB's."""
    lib = _LIB if lib is None else lib
    global _SM_COUNT
    if _SM_COUNT is None:
        _SM_COUNT = torch.cuda.get_device_properties(q.device).multi_processor_count
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    kd = 128 if _OPTIONS and d <= 128 else kernel_dim(d)  # the option kernels are d128 only
    variant = VARIANT if variant is None else variant
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    strides = []
    for t in (q, k, v, out, dout, dq, dk, dv):
        assert t.stride(-1) == 1
        strides += [t.stride(0), t.stride(1), t.stride(2)]
    assert lse.stride(2) == 1
    strides += [lse.stride(0), lse.stride(1)]
    arr = (ctypes.c_int64 * 26)(*strides)
    ws_dim = kd if variant < 0 else lib.fc_sm90_bwd_variant_dim(variant)  # as capi.cu plans the variants' workspace
    ws_bytes = lib.fc_sm90_bwd_workspace_size(b, hq, hkv, sq, sk, d, ws_dim, int(deterministic), _SM_COUNT)
    workspace = torch.empty(ws_bytes, dtype=torch.uint8, device=q.device)
    if POISON_WS:  # NaN in every float of the workspace: whatever the pass does not write shows
        workspace.fill_(255)
    err = ctypes.create_string_buffer(512)
    rc = lib.fc_sm90_bwd(int(q.dtype == torch.bfloat16), kd if variant < 0 else 1000 + variant, q.data_ptr(), k.data_ptr(), v.data_ptr(),
                          out.data_ptr(), dout.data_ptr(), lse.data_ptr(), dq.data_ptr(), dk.data_ptr(),
                          dv.data_ptr(), arr, b, hq, hkv, sq, sk, d, scale, int(causal), int(deterministic), _SM_COUNT,
                          workspace.data_ptr(),
                          torch.cuda.current_stream().cuda_stream, err, 512)
    if rc != 0:
        raise RuntimeError(err.value.decode())
    return workspace  # kept alive by the caller until the stream has run
