"""The public ring attention functions, shaped like flash_attn_func and its packed variants, plus
the process group and the layout of the sequence."""

from flashcore._tensors import check_attention_inputs, check_tensor
from flashcore._library import ArgumentError
from flashcore.distributed import layout as layouts
from flashcore.distributed.comm import RingComm
from flashcore.distributed.ring_attention import RingAttention
from flashcore.flash_attn_interface import _check_softcap, _check_window_size, _softmax_scale


def _reject_unsupported(dropout_p, window_size, alibi_slopes, return_attn_probs):
    _check_window_size(window_size)
    if tuple(window_size) != (-1, -1):
        raise NotImplementedError(
            f"flashcore: window_size={tuple(window_size)} is not supported by ring attention yet: each block's mask "
            "would need its global query and key offsets, which the kernels do not take (only (-1, -1))")
    if alibi_slopes is not None:
        raise NotImplementedError(
            "flashcore: alibi_slopes is not supported by ring attention yet: the bias depends on global positions, "
            "which the kernels do not take per block (only None)")
    if dropout_p != 0.0:
        raise NotImplementedError(f"flashcore: dropout_p={dropout_p} is not supported yet (only 0.0)")
    if return_attn_probs:
        raise NotImplementedError("flashcore: return_attn_probs=True is not supported yet (only False)")


def _ring_attention(q, k, v, softmax_scale, causal, softcap, deterministic, group, layout):
    check_attention_inputs(q, k, v)
    layouts.check_layout(layout)
    causal = bool(causal)
    if causal and k.shape[1] != q.shape[1]:
        raise ArgumentError(f"flashcore: k: causal ring attention needs each rank's q and k to hold the same positions "
                            f"(seqlen_local {q.shape[1]}), got k's seqlen {k.shape[1]}")
    if causal and layout == "zigzag" and q.shape[1] % 2 != 0:
        raise ArgumentError(f"flashcore: q: the zigzag layout holds two equal chunks per rank, so seqlen_local must be "
                            f"even, got {q.shape[1]} (shard the sequence with flashcore.distributed.zigzag_shard)")
    comm = RingComm(group)
    return RingAttention.apply(q, k, v, _softmax_scale(softmax_scale, q.shape[-1]), causal, _check_softcap(softcap),
                               bool(deterministic), layout, comm)


def ring_flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                         alibi_slopes=None, deterministic=False, return_attn_probs=False, group=None,
                         layout="zigzag"):
    """Exact attention over a sequence split across the ranks of `group` (ring attention),
    differentiable with respect to q, k and v.

    Every rank of the group calls it, each with its own shard: q (batch, seqlen_local, nheads,
    headdim), k and v (batch, seqlen_local_k, nheads_k, headdim), the same shapes on every rank,
    float16 or bfloat16, CUDA tensors with an NCCL group or CPU tensors with a gloo one. The
    sequence is split as `layout` says (flashcore.distributed.layout): "zigzag" (the default;
    shard with zigzag_shard) balances causal attention across ranks, "contiguous" is the plain
    split. causal: the mask of the whole sequence (each rank's q and k hold the same positions).
    softmax_scale, softcap, deterministic, nheads % nheads_k == 0 (GQA/MQA) as in flash_attn_func;
    window_size, alibi_slopes and dropout are not supported and raise NotImplementedError.
    group: the torch.distributed process group (None: the default one).
    Returns this rank's out: (batch, seqlen_local, nheads, headdim).
    """
    _reject_unsupported(dropout_p, window_size, alibi_slopes, return_attn_probs)
    return _ring_attention(q, k, v, softmax_scale, causal, softcap, deterministic, group, layout)


def ring_flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                                  softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False,
                                  group=None, layout="zigzag"):
    """ring_flash_attn_func with k and v packed: kv (batch, seqlen_local, 2, nheads_k, headdim)."""
    _reject_unsupported(dropout_p, window_size, alibi_slopes, return_attn_probs)
    check_tensor("kv", kv, 5, "(batch, seqlen_local, 2, nheads_k, headdim)")
    if kv.shape[2] != 2:
        raise ArgumentError(f"flashcore: kv: dimension 2 must be 2 (k, v), got shape {tuple(kv.shape)}")
    k, v = kv.unbind(dim=2)
    return _ring_attention(q, k, v, softmax_scale, causal, softcap, deterministic, group, layout)


def ring_flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                                   softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False,
                                   group=None, layout="zigzag"):
    """ring_flash_attn_func with q, k and v packed: qkv (batch, seqlen_local, 3, nheads, headdim)."""
    _reject_unsupported(dropout_p, window_size, alibi_slopes, return_attn_probs)
    check_tensor("qkv", qkv, 5, "(batch, seqlen_local, 3, nheads, headdim)")
    if qkv.shape[2] != 3:
        raise ArgumentError(f"flashcore: qkv: dimension 2 must be 3 (q, k, v), got shape {tuple(qkv.shape)}")
    q, k, v = qkv.unbind(dim=2)
    return _ring_attention(q, k, v, softmax_scale, causal, softcap, deterministic, group, layout)
