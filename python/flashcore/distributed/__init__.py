"""Context parallelism for flashcore: exact attention over a sequence split across GPUs (or CPU
processes), on torch.distributed.

    import torch.distributed as dist
    from flashcore.distributed import ring_flash_attn_func, zigzag_shard
    dist.init_process_group("nccl")                      # one process per GPU
    q_local = zigzag_shard(q, dist.get_rank(), dist.get_world_size())   # likewise k, v
    out_local = ring_flash_attn_func(q_local, k_local, v_local, causal=True)

ring_flash_attn_func and its packed variants (interface.py) run ring attention (ring_attention.py):
K/V travel round the ring while each rank computes on the block it holds, partial results merged
exactly through their log-sum-exp (flashcore.merge_partials). The zigzag layout (layout.py) gives
every rank the same work under a causal mask; shard/unshard/positions convert between the whole
sequence and a rank's piece. ulysses_ring_flash_attn_func (ulysses.py) adds head parallelism:
an all-to-all over a head group (a node's GPUs) around ring attention across nodes.
"""

from flashcore.distributed.comm import gather
from flashcore.distributed.interface import (ring_flash_attn_func, ring_flash_attn_kvpacked_func,
                                             ring_flash_attn_qkvpacked_func)
from flashcore.distributed.layout import LAYOUTS, positions, shard, unshard, zigzag_shard, zigzag_unshard
from flashcore.distributed.ulysses import shard_2d, ulysses_ring_flash_attn_func, unshard_2d

__all__ = ["ring_flash_attn_func", "ring_flash_attn_kvpacked_func", "ring_flash_attn_qkvpacked_func", "LAYOUTS",
           "shard", "unshard", "positions", "gather", "zigzag_shard", "zigzag_unshard",
           "ulysses_ring_flash_attn_func", "shard_2d", "unshard_2d"]
