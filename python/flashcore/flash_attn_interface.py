"""The flash_attn 2.x functions, with the same signatures, layouts, defaults and return values, so
that `from flashcore import flash_attn_func` replaces `from flash_attn import flash_attn_func`.

window_size, softcap, alibi_slopes, dropout_p and the varlen functions' cu_seqlens follow
flash_attn 2.x (flashcore/attention.h states the rules).

dropout_p > 0: each call takes a seed and an offset from PyTorch's generator of q's device
(_dropout.seed_and_offset), so torch.manual_seed reproduces a run; the backward draws the same mask
again. As in flash_attn, dropout applies whenever dropout_p > 0 (pass 0.0 in evaluation).

return_attn_probs=True returns (out, softmax_lse, S_dmask) as flash_attn 2.x does: S_dmask is None
without dropout (flash_attn refuses that case), else a float32 (batch, nheads, seqlen_q rounded up
to 128, seqlen_k rounded up to 128) tensor (varlen: max_seqlen_q/k rounded) whose sign bit is the
dropout mask (negative: dropped) and whose magnitude is the unnormalised probability as flash_attn's
kernel leaves it: exp(s_ij - m), m the row's running max when key block j // 128 was processed
(blocks go last to first, so m is the max over blocks j // 128 .. end), which flash_attn's tests
undo with normalize_flash_attn_S (the fa_compat shim's _get_block_size_n says 128). Computed here
with torch from q and k; 0 outside the mask and in the padding. Meant for small test shapes: it
materialises seqlen_q x seqlen_k.

block_table (flash_attn_varlen_func's paged KV cache): k and v are pages (num_blocks,
page_block_size, nheads_k, headdim), any page_block_size >= 1, and sequence b's key j is slot
j % page_block_size of page block_table[b, j // page_block_size]; forward only, as in flash_attn (a
gradient through it raises NotImplementedError naming block_table). No option is silently ignored.
"""

import math
import numbers

import torch

from flashcore import _dropout
from flashcore import _ops
from flashcore._library import ArgumentError
from flashcore._ops import attention, attention_dense, eager
from flashcore._tensors import check_attention_inputs, check_cu_seqlens, check_tensor, plain_dense_inputs

_NO_WINDOW = (-1, -1)


def _check_window_size(window_size):
    """window_size must be a pair of ints (or a two-element integer tensor, which flash_attn's own
    tests pass), as in flash_attn (where None is an error too). Returns it as a tuple of ints."""
    if isinstance(window_size, torch.Tensor) and window_size.numel() == 2 and not window_size.is_floating_point() \
            and window_size.dtype != torch.bool:
        return tuple(int(w) for w in window_size.tolist())
    if not isinstance(window_size, (tuple, list)):
        raise TypeError(f"flashcore: window_size: expected a (left, right) pair of ints, got "
                        f"{type(window_size).__name__} {window_size!r}; (-1, -1) means no window")
    if len(window_size) != 2 or not all(isinstance(w, numbers.Integral) and not isinstance(w, bool)
                                        for w in window_size):
        raise ArgumentError(f"flashcore: window_size: expected a (left, right) pair of ints, got {window_size!r}")
    return tuple(int(w) for w in window_size)


def _check_softcap(softcap):
    """softcap as a float: a real number (the library rejects NaN, infinities and negatives)."""
    if isinstance(softcap, numbers.Real) and not isinstance(softcap, bool):
        return float(softcap)
    raise TypeError(f"flashcore: softcap: expected a number (0.0 = off), got {type(softcap).__name__} {softcap!r}")


def _check_alibi_slopes(alibi_slopes, q):
    """What the library cannot see of alibi_slopes: that it is a float32 tensor on q's device (the
    library checks its shape, (nheads,) or (batch, nheads), and its strides)."""
    if alibi_slopes is None:
        return None
    if not isinstance(alibi_slopes, torch.Tensor):
        raise TypeError(f"flashcore: alibi_slopes: expected a float32 tensor of shape (nheads,) or (batch, nheads) "
                        f"or None, got {type(alibi_slopes).__name__}")
    if alibi_slopes.dtype != torch.float32:
        raise ArgumentError(f"flashcore: alibi_slopes: expected dtype torch.float32, got {alibi_slopes.dtype}")
    if alibi_slopes.device != q.device:
        raise ArgumentError(f"flashcore: alibi_slopes: expected a tensor on {q.device} like q, got one on "
                            f"{alibi_slopes.device}")
    if alibi_slopes.dim() not in (1, 2) or alibi_slopes.numel() == 0:
        raise ArgumentError(f"flashcore: alibi_slopes: expected shape (nheads,) or (batch, nheads), got "
                            f"{tuple(alibi_slopes.shape)}")
    return alibi_slopes


def _check_dropout_p(dropout_p):
    """dropout_p as a float (the library rejects values outside [0, 1), naming dropout_p)."""
    if isinstance(dropout_p, numbers.Real) and not isinstance(dropout_p, bool):
        return float(dropout_p)
    raise TypeError(f"flashcore: dropout_p: expected a number in [0, 1), got {type(dropout_p).__name__} "
                    f"{dropout_p!r}")


def _attn_probs(q, k, scale, causal, window_size, softcap, alibi_slopes, keep, padded_q, padded_k):
    """S_dmask for one dense (batch, seqlen, nheads, headdim) call (see the module docstring)."""
    batch, seqlen_q, nheads, _ = q.shape
    seqlen_k, nheads_k = k.shape[1], k.shape[2]
    kk = k.float().repeat_interleave(nheads // nheads_k, dim=2)
    s = torch.einsum("bihd,bjhd->bhij", q.float(), kk) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(seqlen_q, device=q.device).view(-1, 1)
    j = torch.arange(seqlen_k, device=q.device).view(1, -1)
    offset = j - (i + seqlen_k - seqlen_q)  # > 0: right of the diagonal
    if alibi_slopes is not None:
        slopes = alibi_slopes.float().view(-1 if alibi_slopes.dim() == 2 else 1, nheads, 1, 1)
        s = s - slopes * offset.abs()
    visible = torch.ones_like(offset, dtype=torch.bool)
    left, right = window_size
    if causal:
        right = 0
    if right >= 0:
        visible &= offset <= right
    if left >= 0:
        visible &= offset >= -left
    s = s.masked_fill(~visible, float("-inf"))
    # The running max of key blocks of 128 taken last to first: for block t, the max over t .. end.
    block_max = torch.stack([blk.amax(dim=-1) for blk in s.split(128, dim=-1)], dim=-1)
    running = torch.cummax(block_max.flip(-1), dim=-1).values.flip(-1)
    running = running.repeat_interleave(128, dim=-1)[..., :seqlen_k]
    p = torch.nan_to_num(torch.exp(s - running), nan=0.0)
    signed = torch.where(keep, p, -p)
    result = torch.zeros(batch, nheads, padded_q, padded_k, device=q.device, dtype=torch.float32)
    result[:, :, :seqlen_q, :seqlen_k] = signed
    return result


def _round128(n):
    return (n + 127) // 128 * 128


def _check_max_seqlen(name, value):
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point():
        value = int(value.item())
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"flashcore: {name}: expected an int, got {type(value).__name__} {value!r}")
    return int(value)


def _softmax_scale(softmax_scale, headdim):
    """The scale as a finite float: None gives 1/sqrt(headdim); a real number or a one-element
    tensor is taken as is; anything else (a string, a bool, a tensor of several elements, NaN, inf)
    is an error naming softmax_scale, rather than float()'s message or a silent coercion."""
    if softmax_scale is None:
        return headdim ** (-0.5)
    if isinstance(softmax_scale, torch.Tensor):
        if softmax_scale.numel() != 1 or softmax_scale.is_complex() or softmax_scale.dtype == torch.bool:
            raise TypeError(f"flashcore: softmax_scale: expected a number or a one-element real tensor, got a "
                            f"{softmax_scale.dtype} tensor of shape {tuple(softmax_scale.shape)}")
        value = float(softmax_scale.item())
    elif isinstance(softmax_scale, numbers.Real) and not isinstance(softmax_scale, bool):
        value = float(softmax_scale)
    else:
        raise TypeError(f"flashcore: softmax_scale: expected a number or None, got "
                        f"{type(softmax_scale).__name__} {softmax_scale!r}")
    if not math.isfinite(value):
        raise ArgumentError(f"flashcore: softmax_scale: must be finite, got {value}")
    return value


def _attention(q, k, v, softmax_scale, causal, deterministic, window_size, softcap, alibi_slopes, return_attn_probs,
               varlen=None, dropout_p=0.0):
    """out, or (out, softmax_lse, S_dmask) with return_attn_probs. varlen: (cu_seqlens_q, cu_seqlens_k,
    max_seqlen_q, max_seqlen_k) for packed sequences."""
    check_attention_inputs(q, k, v, varlen is not None)
    dropout_p = _check_dropout_p(dropout_p)
    window_size = _check_window_size(window_size)
    softcap = _check_softcap(softcap)
    alibi_slopes = _check_alibi_slopes(alibi_slopes, q)
    packed = ()
    if varlen is not None:
        cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k = varlen
        check_cu_seqlens("cu_seqlens_q", cu_seqlens_q, q)
        check_cu_seqlens("cu_seqlens_k", cu_seqlens_k, q)
        packed = (cu_seqlens_q, cu_seqlens_k, _check_max_seqlen("max_seqlen_q", max_seqlen_q),
                  _check_max_seqlen("max_seqlen_k", max_seqlen_k))
    else:
        packed = (None, None, 0, 0)
    seed, offset = _dropout.seed_and_offset(q.device) if dropout_p > 0.0 else (0, 0)
    scale = _softmax_scale(softmax_scale, q.shape[-1])
    out, lse = attention(q, k, v, scale, bool(causal), bool(deterministic), int(window_size[0]), int(window_size[1]),
                         softcap, alibi_slopes, *packed, dropout_p, seed, offset)
    if not return_attn_probs:
        return out
    if dropout_p == 0.0:
        return out, lse, None
    with torch.no_grad():
        if varlen is None:
            keep = _dropout.keep_mask(q.shape[0], q.shape[2], q.shape[1], k.shape[1], dropout_p, seed, offset,
                                      q.device)
            s_dmask = _attn_probs(q, k, scale, causal, window_size, softcap, alibi_slopes, keep,
                                  _round128(q.shape[1]), _round128(k.shape[1]))
        else:
            cu_q, cu_k = packed[0].tolist(), packed[1].tolist()
            s_dmask = torch.zeros(len(cu_q) - 1, q.shape[1], _round128(packed[2]), _round128(packed[3]),
                                  device=q.device, dtype=torch.float32)
            for b in range(len(cu_q) - 1):
                nq, nk = cu_q[b + 1] - cu_q[b], cu_k[b + 1] - cu_k[b]
                if nq == 0 or nk == 0:
                    continue
                keep = _dropout.keep_mask(1, q.shape[1], nq, nk, dropout_p, seed, offset, q.device, batch0=b)
                slopes = alibi_slopes[b] if alibi_slopes is not None and alibi_slopes.dim() == 2 else alibi_slopes
                s_dmask[b:b + 1, :, :nq, :nk] = _attn_probs(
                    q[cu_q[b]:cu_q[b + 1]].unsqueeze(0), k[cu_k[b]:cu_k[b + 1]].unsqueeze(0), scale, causal,
                    window_size, softcap, slopes, keep, nq, nk)
    return out, lse, s_dmask


class _PagedForward(torch.autograd.Function):
    """The paged varlen forward, so that a gradient asked through it fails naming block_table instead
    of silently missing q's share (flash_attn has no backward for it either)."""

    @staticmethod
    def forward(ctx, q, k, v, options):
        out, lse = _ops.run_forward(q, k, v, *options)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        raise NotImplementedError("flashcore: block_table: the paged varlen forward (flash_attn_varlen_func with "
                                  "block_table) has no backward, as in flash_attn; pass packed k and v to train")


def _paged_varlen(q, k, v, varlen, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                  return_attn_probs, block_table):
    """flash_attn_varlen_func with block_table: k and v are pages the library gathers (attention.h)."""
    check_attention_inputs(q, k, v, varlen=True, paged=True)
    if not isinstance(block_table, torch.Tensor):
        raise TypeError(f"flashcore: block_table: expected an int32 tensor or None, got {type(block_table).__name__}")
    if block_table.dtype != torch.int32:
        raise ArgumentError(f"flashcore: block_table: expected dtype torch.int32, got {block_table.dtype}")
    if block_table.device != q.device:
        raise ArgumentError(f"flashcore: block_table: expected a tensor on {q.device} like q, got one on "
                            f"{block_table.device}")
    dropout_p = _check_dropout_p(dropout_p)
    if return_attn_probs and dropout_p > 0.0:
        raise NotImplementedError("flashcore: return_attn_probs: S_dmask is not computed for paged keys "
                                  "(block_table) with dropout_p > 0")
    window_size = _check_window_size(window_size)
    softcap = _check_softcap(softcap)
    alibi_slopes = _check_alibi_slopes(alibi_slopes, q)
    cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k = varlen
    check_cu_seqlens("cu_seqlens_q", cu_seqlens_q, q)
    check_cu_seqlens("cu_seqlens_k", cu_seqlens_k, q)
    seed, offset = _dropout.seed_and_offset(q.device) if dropout_p > 0.0 else (0, 0)
    options = (_softmax_scale(softmax_scale, q.shape[-1]), bool(causal), int(window_size[0]), int(window_size[1]),
               softcap, alibi_slopes, cu_seqlens_q, cu_seqlens_k, _check_max_seqlen("max_seqlen_q", max_seqlen_q),
               _check_max_seqlen("max_seqlen_k", max_seqlen_k), dropout_p, seed, offset, block_table)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        out, lse = _PagedForward.apply(q, k, v, options)
    else:
        out, lse = _ops.run_forward(q, k, v, *options)
    return (out, lse, None) if return_attn_probs else out


def _defaults_only(dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                   return_attn_probs):
    """Whether flash_attn_func's options are its defaults, up to softmax_scale (None or a finite
    float) and causal / deterministic (bools): what the dense route serves. Exact types only, so
    anything the full checks would convert or reject takes them."""
    return ((window_size is _NO_WINDOW or (type(window_size) is tuple and window_size == _NO_WINDOW
                                           and type(window_size[0]) is int and type(window_size[1]) is int))
            and alibi_slopes is None and return_attn_probs is False
            and (causal is False or causal is True) and (deterministic is False or deterministic is True)
            and (type(dropout_p) is float or type(dropout_p) is int) and dropout_p == 0
            and (type(softcap) is float or type(softcap) is int) and softcap == 0
            and (softmax_scale is None or (type(softmax_scale) is float and math.isfinite(softmax_scale))))


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=_NO_WINDOW, softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """Exact attention, differentiable with respect to q, k and v.

    q: (batch, seqlen_q, nheads, headdim); k, v: (batch, seqlen_k, nheads_k, headdim), float16 or
    bfloat16 on the CPU or a CUDA device, or float32 on the CPU. nheads must be a multiple of nheads_k (GQA/MQA).
    softmax_scale: default 1 / sqrt(headdim). causal: the mask is aligned to the bottom-right
    corner of the score matrix when seqlen_q != seqlen_k, as in flash_attn 2.1+.
    window_size: (left, right), -1 = unbounded: query i sees keys j with
    i + seqlen_k - seqlen_q - left <= j <= i + seqlen_k - seqlen_q + right (causal sets right to 0).
    softcap: > 0 caps the scores at softcap * tanh(score / softcap). alibi_slopes: float32
    (nheads,) or (batch, nheads); adds -slope * |i + seqlen_k - seqlen_q - j| to the scores.
    deterministic: bit-identical gradients run after run.
    dropout_p: in [0, 1); the seed and offset come from PyTorch's generator (module docstring).
    Returns out: (batch, seqlen_q, nheads, headdim); with return_attn_probs (out, softmax_lse, S_dmask),
    softmax_lse (batch, nheads, seqlen_q) float32, S_dmask None without dropout (module docstring).
    """
    # The common call (plain tensors, default options) skips the general checks and routing, whose
    # Python costs more than the library call (docs/tuning/binding_overhead.md); everything else,
    # bad input included, takes them.
    if eager() and plain_dense_inputs(q, k, v) and _defaults_only(dropout_p, softmax_scale, causal, window_size,
                                                                  softcap, alibi_slopes, deterministic,
                                                                  return_attn_probs):
        scale = q.shape[3] ** -0.5 if softmax_scale is None else softmax_scale
        return attention_dense(q, k, v, scale, causal, deterministic)[0]
    return _attention(q, k, v, softmax_scale, causal, deterministic, window_size, softcap, alibi_slopes,
                      return_attn_probs, dropout_p=dropout_p)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                             softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flash_attn_func with k and v packed: kv (batch, seqlen_k, 2, nheads_k, headdim).
    Returns out: (batch, seqlen_q, nheads, headdim)."""
    check_tensor("kv", kv, 5, "(batch, seqlen_k, 2, nheads_k, headdim)")
    if kv.shape[2] != 2:
        raise ArgumentError(f"flashcore: kv: dimension 2 must be 2 (k, v), got shape {tuple(kv.shape)}")
    k, v = kv.unbind(dim=2)  # views: no copy
    return _attention(q, k, v, softmax_scale, causal, deterministic, window_size, softcap, alibi_slopes,
                      return_attn_probs, dropout_p=dropout_p)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                              softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flash_attn_func with q, k and v packed: qkv (batch, seqlen, 3, nheads, headdim).
    Returns out: (batch, seqlen, nheads, headdim)."""
    check_tensor("qkv", qkv, 5, "(batch, seqlen, 3, nheads, headdim)")
    if qkv.shape[2] != 3:
        raise ArgumentError(f"flashcore: qkv: dimension 2 must be 3 (q, k, v), got shape {tuple(qkv.shape)}")
    q, k, v = qkv.unbind(dim=2)  # views: no copy
    return _attention(q, k, v, softmax_scale, causal, deterministic, window_size, softcap, alibi_slopes,
                      return_attn_probs, dropout_p=dropout_p)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """flash_attn_func over packed sequences of different lengths.

    q: (total_q, nheads, headdim); k, v: (total_k, nheads_k, headdim); cu_seqlens_q / cu_seqlens_k:
    int32 (batch + 1,) offsets of each sequence's first row (the last is the total), on q's device;
    max_seqlen_q / max_seqlen_k: the longest sequence of each. No query sees another sequence's
    keys; causal, window_size and ALiBi are aligned per sequence (bottom-right). alibi_slopes:
    (nheads,) or (batch, nheads). Returns out: (total_q, nheads, headdim); with return_attn_probs
    (out, softmax_lse (nheads, total_q) float32, None). block_table: int32 (batch, max_blocks), k and v
    then pages (num_blocks, page_block_size, nheads_k, headdim) (module docstring; forward only).
    """
    if block_table is not None:
        return _paged_varlen(q, k, v, (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k), dropout_p,
                             softmax_scale, causal, window_size, softcap, alibi_slopes, return_attn_probs, block_table)
    return _attention(q, k, v, softmax_scale, causal, deterministic, window_size, softcap, alibi_slopes,
                      return_attn_probs, (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k), dropout_p)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                                    softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flash_attn_varlen_func with k and v packed: kv (total_k, 2, nheads_k, headdim)."""
    check_tensor("kv", kv, 4, "(total_k, 2, nheads_k, headdim)")
    if kv.shape[1] != 2:
        raise ArgumentError(f"flashcore: kv: dimension 1 must be 2 (k, v), got shape {tuple(kv.shape)}")
    k, v = kv.unbind(dim=1)  # views: no copy
    return _attention(q, k, v, softmax_scale, causal, deterministic, window_size, softcap, alibi_slopes,
                      return_attn_probs, (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k), dropout_p)


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0, softmax_scale=None, causal=False,
                                     window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                                     return_attn_probs=False):
    """flash_attn_varlen_func with q, k and v packed: qkv (total, 3, nheads, headdim), one set of
    offsets for queries and keys."""
    check_tensor("qkv", qkv, 4, "(total, 3, nheads, headdim)")
    if qkv.shape[1] != 3:
        raise ArgumentError(f"flashcore: qkv: dimension 1 must be 3 (q, k, v), got shape {tuple(qkv.shape)}")
    q, k, v = qkv.unbind(dim=1)  # views: no copy
    return _attention(q, k, v, softmax_scale, causal, deterministic, window_size, softcap, alibi_slopes,
                      return_attn_probs, (cu_seqlens, cu_seqlens, max_seqlen, max_seqlen), dropout_p)


__all__ = ["flash_attn_func", "flash_attn_kvpacked_func", "flash_attn_qkvpacked_func", "flash_attn_varlen_func",
           "flash_attn_varlen_kvpacked_func", "flash_attn_varlen_qkvpacked_func"]
