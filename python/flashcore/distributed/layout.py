"""How a sequence is split across the ranks of a context-parallel group, and which block of the
score matrix each rank computes at each step of the ring.

Two layouts:
  zigzag      the sequence cut into 2 * world_size chunks; rank r holds chunks r and
              2 * world_size - 1 - r, in that order. Under a causal mask every rank then does the
              same work: early chunks see few keys, late ones many, and each rank has one of each.
              The default, and the one to use for causal attention.
  contiguous  rank r holds the r-th of world_size equal pieces. Without a mask as good as zigzag;
              with one, rank r does r + 1/2 blocks of work while the last does world_size - 1/2,
              so the ring runs at the pace of the last rank (kept for comparison and for data
              already split this way).

At step s of the ring, rank r holds the keys and values of rank (r - s) mod world_size (its own at
step 0). block() says which of its query rows attend to which of those keys, and whether the
causal mask applies inside the block. For zigzag, with c = seqlen_local / 2 (q chunks r and
2W-1-r, kv chunks src and 2W-1-src):
  src == r   every row, every key, causal (the local order is the global order)
  src <  r   every row, the kv's first chunk only, no mask (chunk src precedes both q chunks;
             chunk 2W-1-src follows both)
  src >  r   the second q chunk only, every key, no mask (both kv chunks precede chunk 2W-1-r;
             neither precedes chunk r)
so each step past the first is a c x 2c (or 2c x c) unmasked block: equal work on every rank.
"""

from dataclasses import dataclass
from typing import Optional

import torch

from flashcore._library import ArgumentError

LAYOUTS = ("zigzag", "contiguous")


def check_layout(layout):
    if layout not in LAYOUTS:
        raise ArgumentError(f"flashcore: layout: expected one of {', '.join(map(repr, LAYOUTS))}, got {layout!r}")


@dataclass(frozen=True)
class Block:
    """Query rows `rows` of the local shard attend to keys `cols` of the block held, `causal` or not."""

    rows: slice
    cols: slice
    causal: bool


_ALL = slice(None)


def block(layout, causal, rank, source, seqlen_q, seqlen_k) -> Optional[Block]:
    """The block rank `rank` computes against the keys of rank `source`; None when it sees none."""
    if not causal:
        return Block(_ALL, _ALL, False)
    if source == rank:
        return Block(_ALL, _ALL, True)
    if layout == "contiguous":
        return Block(_ALL, _ALL, False) if source < rank else None
    if source < rank:
        return Block(_ALL, slice(0, seqlen_k // 2), False)
    return Block(slice(seqlen_q // 2, None), _ALL, False)


def _check_split(name, seqlen, world_size, layout):
    pieces = 2 * world_size if layout == "zigzag" else world_size
    if seqlen % pieces != 0:
        raise ArgumentError(f"flashcore: {name}: the {layout} layout over {world_size} ranks needs a sequence length "
                            f"divisible by {pieces}, got {seqlen}")
    return pieces


def shard(x, rank, world_size, layout="zigzag", dim=1):
    """Rank `rank`'s piece of the whole sequence `x` (the sequence along `dim`), as a contiguous
    tensor. zigzag: chunks rank and 2 * world_size - 1 - rank of 2 * world_size, concatenated."""
    check_layout(layout)
    if not 0 <= rank < world_size:
        raise ArgumentError(f"flashcore: rank: expected 0 <= rank < world_size ({world_size}), got {rank}")
    pieces = _check_split("x", x.shape[dim], world_size, layout)
    chunks = x.chunk(pieces, dim=dim)
    if layout == "contiguous":
        return chunks[rank].contiguous()
    return torch.cat([chunks[rank], chunks[pieces - 1 - rank]], dim=dim)


def unshard(shards, layout="zigzag", dim=1):
    """The whole sequence from every rank's piece, `shards[r]` being rank r's (shard's inverse)."""
    check_layout(layout)
    world_size = len(shards)
    if layout == "contiguous":
        return torch.cat(list(shards), dim=dim)
    halves = [s.chunk(2, dim=dim) for s in shards]
    ordered = [halves[r][0] for r in range(world_size)] + [halves[r][1] for r in reversed(range(world_size))]
    return torch.cat(ordered, dim=dim)


def positions(seqlen, rank, world_size, layout="zigzag", device=None):
    """The global token positions rank `rank` holds, in local order (e.g. for rotary embeddings)."""
    return shard(torch.arange(seqlen, device=device), rank, world_size, layout, dim=0)


def zigzag_shard(x, rank, world_size, dim=1):
    """shard() with the zigzag layout: the split that balances causal attention."""
    return shard(x, rank, world_size, "zigzag", dim)


def zigzag_unshard(shards, dim=1):
    """unshard() with the zigzag layout."""
    return unshard(shards, "zigzag", dim)
