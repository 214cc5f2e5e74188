"""The flash_attn 2.x functions, with the same signatures, layouts, defaults and return values, so
that `from flashcore import flash_attn_func` replaces `from flash_attn import flash_attn_func`.

Options flashcore does not implement yet raise NotImplementedError naming the option; none is
silently ignored.
"""

from flashcore._ops import attention
from flashcore._tensors import check_attention_inputs, check_tensor


def _reject_unsupported(dropout_p, window_size, softcap, alibi_slopes, return_attn_probs):
    if dropout_p != 0.0:
        raise NotImplementedError(f"flashcore: dropout_p={dropout_p} is not supported yet (only 0.0)")
    if tuple(window_size) != (-1, -1):
        raise NotImplementedError(
            f"flashcore: window_size={tuple(window_size)} (local attention) is not supported yet (only (-1, -1))")
    if softcap != 0.0:
        raise NotImplementedError(f"flashcore: softcap={softcap} is not supported yet (only 0.0)")
    if alibi_slopes is not None:
        raise NotImplementedError("flashcore: alibi_slopes is not supported yet (only None)")
    if return_attn_probs:
        raise NotImplementedError("flashcore: return_attn_probs=True is not supported yet (only False)")


def _attention(q, k, v, softmax_scale, causal, deterministic):
    check_attention_inputs(q, k, v)
    if softmax_scale is None:
        softmax_scale = q.shape[-1] ** (-0.5)
    return attention(q, k, v, float(softmax_scale), bool(causal), bool(deterministic))


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """Exact attention, differentiable with respect to q, k and v.

    q: (batch, seqlen_q, nheads, headdim); k, v: (batch, seqlen_k, nheads_k, headdim), float16 or
    bfloat16, on the CPU or a CUDA device. nheads must be a multiple of nheads_k (GQA/MQA).
    softmax_scale: default 1 / sqrt(headdim). causal: the mask is aligned to the bottom-right
    corner of the score matrix when seqlen_q != seqlen_k, as in flash_attn 2.1+.
    deterministic: bit-identical gradients run after run.
    Returns out: (batch, seqlen_q, nheads, headdim).
    """
    _reject_unsupported(dropout_p, window_size, softcap, alibi_slopes, return_attn_probs)
    return _attention(q, k, v, softmax_scale, causal, deterministic)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                             softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flash_attn_func with k and v packed: kv (batch, seqlen_k, 2, nheads_k, headdim).
    Returns out: (batch, seqlen_q, nheads, headdim)."""
    _reject_unsupported(dropout_p, window_size, softcap, alibi_slopes, return_attn_probs)
    check_tensor("kv", kv, 5, "(batch, seqlen_k, 2, nheads_k, headdim)")
    if kv.shape[2] != 2:
        raise ValueError(f"flashcore: kv: dimension 2 must be 2 (k, v), got shape {tuple(kv.shape)}")
    k, v = kv.unbind(dim=2)  # views: no copy
    return _attention(q, k, v, softmax_scale, causal, deterministic)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                              softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flash_attn_func with q, k and v packed: qkv (batch, seqlen, 3, nheads, headdim).
    Returns out: (batch, seqlen, nheads, headdim)."""
    _reject_unsupported(dropout_p, window_size, softcap, alibi_slopes, return_attn_probs)
    check_tensor("qkv", qkv, 5, "(batch, seqlen, 3, nheads, headdim)")
    if qkv.shape[2] != 3:
        raise ValueError(f"flashcore: qkv: dimension 2 must be 3 (q, k, v), got shape {tuple(qkv.shape)}")
    q, k, v = qkv.unbind(dim=2)  # views: no copy
    return _attention(q, k, v, softmax_scale, causal, deterministic)


__all__ = ["flash_attn_func", "flash_attn_kvpacked_func", "flash_attn_qkvpacked_func"]
