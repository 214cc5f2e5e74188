"""Head-parallel (Ulysses) attention, alone or combined with ring attention: the 2-D mesh of
docs/context_parallelism.md, section 5.

P = R x U ranks: U ranks of a head group (a node's GPUs, linked by NVLink) each hold S/P tokens of
every head; an all-to-all over the head group gives each of them all U x S/P tokens of H/U query
heads and Hkv/U kv heads. Attention then runs on those, across the ring group of R ranks (ring
attention; nothing when there is no ring group), and the inverse all-to-all returns the output to
the sequence split. Gradients take the same all-to-alls in reverse. The all-to-alls are not
overlapped with compute: they move (U-1)/U of each rank's q, k, v and out once per pass.

The sequence split this expects (shard_2d): the ring layout over the R ring positions (zigzag: ring
position i holds chunks i and 2R-1-i of 2R), each position's tokens split contiguously across its U
head-group ranks, so the all-to-all reassembles exactly the ring position's shard in order.
"""

import torch
import torch.distributed as dist

from flashcore._library import ArgumentError
from flashcore.distributed import layout as layouts
from flashcore.distributed.interface import _reject_unsupported, ring_flash_attn_func
from flashcore.flash_attn_interface import flash_attn_func


def _size(group):
    return 1 if group is None else dist.get_world_size(group)


def _sequence_to_heads(x, group):
    """(B, S, H, D) of S tokens, every head -> (B, U*S, H/U, D): all U ranks' tokens, this rank's heads."""
    world = _size(group)
    if world == 1:
        return x
    batch, seqlen, heads, dim = x.shape
    send = x.reshape(batch, seqlen, world, heads // world, dim).permute(2, 0, 1, 3, 4).contiguous()  # block j -> rank j
    received = torch.empty_like(send)  # block j <- rank j: its tokens of this rank's heads
    dist.all_to_all_single(received, send, group=group)
    return received.permute(1, 0, 2, 3, 4).reshape(batch, world * seqlen, heads // world, dim)


def _heads_to_sequence(x, group):
    """The inverse: (B, U*S, H/U, D) -> (B, S, H, D)."""
    world = _size(group)
    if world == 1:
        return x
    batch, tokens, heads, dim = x.shape
    send = x.reshape(batch, world, tokens // world, heads, dim).permute(1, 0, 2, 3, 4).contiguous()  # block j: rank j's tokens
    received = torch.empty_like(send)  # block j <- rank j: this rank's tokens of rank j's heads
    dist.all_to_all_single(received, send, group=group)
    return received.permute(1, 2, 0, 3, 4).reshape(batch, tokens // world, world * heads, dim)


class _SequenceToHeads(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _sequence_to_heads(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _heads_to_sequence(grad.contiguous(), ctx.group), None


class _HeadsToSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _heads_to_sequence(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _sequence_to_heads(grad.contiguous(), ctx.group), None


def shard_2d(x, ring_rank, ring_size, head_rank, head_size, layout="zigzag", dim=1):
    """A rank's piece of the whole sequence for ulysses_ring_flash_attn_func: the ring layout's shard
    of ring position ring_rank, then its head_rank-th contiguous part of head_size."""
    return layouts.shard(layouts.shard(x, ring_rank, ring_size, layout, dim), head_rank, head_size, "contiguous", dim)


def unshard_2d(shards, layout="zigzag", dim=1):
    """The whole sequence from shards[ring_rank][head_rank] (shard_2d's inverse)."""
    return layouts.unshard([torch.cat(list(row), dim=dim) for row in shards], layout, dim)


def ulysses_ring_flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                                 softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False,
                                 ring_group=None, head_group=None, layout="zigzag"):
    """Exact attention over a sequence split across a (ring x head) mesh of ranks; differentiable.

    q (batch, seqlen_local, nheads, headdim), k and v (batch, seqlen_local, nheads_k, headdim): this
    rank's shard_2d piece. head_group: the ranks that trade heads for tokens (all-to-all), U of them,
    nheads and nheads_k divisible by U; None: no head parallelism. ring_group: the ranks ring
    attention runs across (one per head-group position); None: no ring, plain attention on the
    gathered sequence (then the head group must hold the whole sequence, in order). The other
    arguments as in ring_flash_attn_func. Returns this rank's out (batch, seqlen_local, nheads, headdim).
    """
    _reject_unsupported(dropout_p, window_size, alibi_slopes, return_attn_probs)
    world = _size(head_group)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ArgumentError(f"flashcore: {name}: expected a rank-4 tensor (batch, seqlen_local, nheads, headdim)")
        if t.shape[2] % world != 0:
            raise ArgumentError(f"flashcore: {name}: the head group has {world} ranks, so its heads ({t.shape[2]}) "
                                f"must divide by {world} (repeat kv heads first when nheads_k < {world})")
    q, k, v = (_SequenceToHeads.apply(t, head_group) for t in (q, k, v))
    if ring_group is None:
        out = flash_attn_func(q, k, v, softmax_scale=softmax_scale, causal=causal, softcap=softcap,
                              deterministic=deterministic)
    else:
        out = ring_flash_attn_func(q, k, v, softmax_scale=softmax_scale, causal=causal, softcap=softcap,
                                   deterministic=deterministic, group=ring_group, layout=layout)
    return _HeadsToSequence.apply(out, head_group)
