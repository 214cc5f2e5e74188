"""flash_attn_with_kvcache: flash_attn 2.x's decoding entry point, same signature and return values.

Appends k / v (rotated when rotary_cos / rotary_sin are given) to k_cache / v_cache in place at
cache_seqlens, then attention of q over each sequence's cache; contiguous caches
(batch_cache, seqlen_cache, nheads_k, headdim) or paged ones (num_blocks, page_block_size,
nheads_k, headdim) with block_table (batch, max_blocks), any page_block_size >= 1 (flash_attn
needs a multiple of 256). flashcore/kvcache.h states every rule. Inference only: no autograd.
"""

import ctypes
import numbers

import torch

from flashcore import _library as lib
from flashcore._library import ArgumentError
from flashcore._ops import _launch_context
from flashcore._tensors import check_tensor, pack
from flashcore.flash_attn_interface import _check_alibi_slopes, _check_softcap, _check_window_size, _softmax_scale

_CACHE_LAYOUT = "(batch_size_cache, seqlen_cache, nheads_k, headdim) or (num_blocks, page_block_size, nheads_k, headdim)"


def _index_tensor(name, value, q, batch):
    """An int32 tensor on q's device (an int cache_seqlens becomes one, as in flash_attn)."""
    if value is None:
        return None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return torch.full((batch,), int(value), dtype=torch.int32, device=q.device)
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"flashcore: {name}: expected an int32 tensor or None, got {type(value).__name__}")
    if value.dtype != torch.int32:
        raise ArgumentError(f"flashcore: {name}: expected dtype torch.int32, got {value.dtype}")
    if value.device != q.device:
        raise ArgumentError(f"flashcore: {name}: expected a tensor on {q.device} like q, got one on {value.device}")
    return value


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None, cache_seqlens=None,
                            cache_batch_idx=None, cache_leftpad=None, block_table=None, softmax_scale=None, causal=False,
                            window_size=(-1, -1), softcap=0.0, rotary_interleaved=True, alibi_slopes=None,
                            num_splits=0, return_softmax_lse=False, *, check_indices=True):
    """q: (batch, seqlen_q, nheads, headdim); k_cache, v_cache: see the module docstring; k, v:
    optional (batch, seqlen_new, nheads_k, headdim); rotary_cos / rotary_sin: optional
    (seqlen_ro, rotary_dim / 2); cache_seqlens: int or int32 (batch,); cache_batch_idx,
    cache_leftpad: optional int32 (batch,); block_table: optional int32 (batch, max_blocks);
    num_splits: 0 = heuristic. check_indices (flashcore only): False skips copying the index
    tensors to the host to check them (no synchronisation; invalid indices then give unspecified
    results, never out-of-bounds accesses).
    Returns out (batch, seqlen_q, nheads, headdim), and softmax_lse (batch, nheads, seqlen_q)
    float32 when return_softmax_lse."""
    check_tensor("q", q, 4, "(batch, seqlen_q, nheads, headdim)")
    check_tensor("k_cache", k_cache, 4, _CACHE_LAYOUT)
    check_tensor("v_cache", v_cache, 4, _CACHE_LAYOUT)
    _check_window_size(window_size)
    softcap = _check_softcap(softcap)
    alibi_slopes = _check_alibi_slopes(alibi_slopes, q)
    if not isinstance(num_splits, numbers.Integral) or isinstance(num_splits, bool):
        raise TypeError(f"flashcore: num_splits: expected an int, got {type(num_splits).__name__}")
    if lib.forward_kvcache is None:
        raise NotImplementedError(f"flashcore: {lib.LIBRARY_PATH} has no flashcore_forward_kvcache; rebuild it")
    batch, seqlen_q, nheads, _ = q.shape
    cache_seqlens = _index_tensor("cache_seqlens", cache_seqlens, q, batch)
    cache_batch_idx = _index_tensor("cache_batch_idx", cache_batch_idx, q, batch)
    cache_leftpad = _index_tensor("cache_leftpad", cache_leftpad, q, batch)
    block_table = _index_tensor("block_table", block_table, q, batch)
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = q.new_empty((batch, nheads, seqlen_q), dtype=torch.float32) if return_softmax_lse else None
    descriptors, views = pack(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                              cache_leftpad, block_table, out, lse, alibi_slopes)
    stream, num_threads, guard = _launch_context(q.device)
    options = lib.options(_softmax_scale(softmax_scale, q.shape[-1]), bool(causal), stream=stream,
                          num_threads=num_threads, window_left=int(window_size[0]), window_right=int(window_size[1]),
                          softcap=softcap, alibi_slopes=views[13])
    kv_options = lib.kvcache_options(rotary_interleaved, int(num_splits), check_indices)
    if guard is None:
        status = lib.forward_kvcache(*views[:13], ctypes.byref(options), ctypes.byref(kv_options))
    else:
        with guard:
            status = lib.forward_kvcache(*views[:13], ctypes.byref(options), ctypes.byref(kv_options))
    if status:
        lib.check(status)
    return (out, lse) if return_softmax_lse else out


__all__ = ["flash_attn_with_kvcache"]
