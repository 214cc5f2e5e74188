"""Merging partial attention results (flashcore/merge.h): attention computed over separate blocks
of keys, combined exactly through the log-sum-exp. What ring attention (flashcore.distributed)
folds each block in with, and what split-KV decoding needs.

For the same queries over disjoint key sets A and B,
    lse = log(exp(lse_a) + exp(lse_b)),   out = exp(lse_a - lse) * out_a + exp(lse_b - lse) * out_b
is attention over A ∪ B, computed here in float32 by one library call (a CUDA kernel for CUDA
tensors, the CPU backend otherwise), whatever the tensors' dtypes.
"""

import torch

from flashcore._library import ArgumentError
from flashcore._ops import run_merge
from flashcore._tensors import check_tensor

_OUT_LAYOUT = "(batch, seqlen, nheads, headdim)"
_LSE_LAYOUT = "(batch, nheads, seqlen)"
_OUT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _check(name, t, rank, layout, dtypes, device):
    check_tensor(name, t, rank, layout)
    if t.dtype not in dtypes:
        raise ArgumentError(f"flashcore: {name}: expected dtype {' or '.join(map(str, dtypes))}, got {t.dtype}")
    if t.device != device:
        raise ArgumentError(f"flashcore: {name}: expected a tensor on {device} like out_a, got one on {t.device}")
    if t.device.type not in ("cpu", "cuda"):
        raise ArgumentError(f"flashcore: {name}: expected a CPU or CUDA tensor, got one on {t.device}")


def merge_partials(out_a, lse_a, out_b, lse_b, out=None, lse=None):
    """Merges two partial attention results for the same queries over disjoint sets of keys.

    out_a, out_b: (batch, seqlen, nheads, headdim), float16, bfloat16 or float32 (each its own);
    lse_a, lse_b: (batch, nheads, seqlen) float32, natural log, as flash attention's forward
    returns them. out / lse: where to write the result (out may be any of the three dtypes; pass
    out_a / lse_a themselves to merge in place); None allocates them (out like out_a).
    Rows that saw no key in a block have lse -inf there and take the other block's result exactly.
    Returns (out, lse).
    """
    device = out_a.device if isinstance(out_a, torch.Tensor) else None
    _check("out_a", out_a, 4, _OUT_LAYOUT, _OUT_DTYPES, device)
    _check("out_b", out_b, 4, _OUT_LAYOUT, _OUT_DTYPES, device)
    _check("lse_a", lse_a, 3, _LSE_LAYOUT, (torch.float32,), device)
    _check("lse_b", lse_b, 3, _LSE_LAYOUT, (torch.float32,), device)
    if out is None:
        out = torch.empty_like(out_a, memory_format=torch.contiguous_format)
    else:
        _check("out", out, 4, _OUT_LAYOUT, _OUT_DTYPES, device)
    if lse is None:
        lse = torch.empty_like(lse_a, memory_format=torch.contiguous_format)
    else:
        _check("lse", lse, 3, _LSE_LAYOUT, (torch.float32,), device)
    run_merge(out_a, lse_a, out_b, lse_b, out, lse)
    return out, lse


__all__ = ["merge_partials"]
