"""flashcore.distributed (ring attention, and Ulysses head parallelism around it) and
flashcore.merge_partials.

The process-group tests spawn 2, 3 and 4 processes (gloo on the CPU; NCCL, one GPU each, where the
machine has that many GPUs) and compare every rank's shard of out, dq, dk and dv with attention on
the whole sequence (ring_worker.py says how); 2 processes also run pure Ulysses, 4 a 2 x 2 mesh of
Ulysses inside ring. The rest runs in this process: the layouts' plan
against the causal mask element by element, shard/unshard, a one-rank group, argument errors, and
the merge against its formula.
"""

import math

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import ring_worker
from flashcore import flash_attn_func, merge_partials
from flashcore.distributed import (positions, ring_flash_attn_func, ring_flash_attn_qkvpacked_func, shard,
                                   shard_2d, ulysses_ring_flash_attn_func, unshard, unshard_2d, zigzag_shard,
                                   zigzag_unshard)
from flashcore.distributed.layout import block

BF16, FP16 = torch.bfloat16, torch.float16

# Small on purpose: each process runs the float64 reference on the whole sequence too.
RING_CASES = {
    2: [
        dict(dtype=BF16, batch=2, seqlen_local=16, heads=4, heads_k=4, headdim=32, causal=True),
        dict(dtype=FP16, batch=1, seqlen_local=24, heads=4, heads_k=2, headdim=64, causal=True),
        dict(dtype=BF16, batch=1, seqlen_local=20, heads=4, heads_k=1, headdim=32, causal=False),
        dict(dtype=BF16, batch=1, seqlen_local=16, heads=2, heads_k=2, headdim=32, causal=True, layout="contiguous"),
        dict(dtype=FP16, batch=1, seqlen_local=16, heads=4, heads_k=2, headdim=40, causal=True, softcap=2.0),
        dict(dtype=BF16, batch=1, seqlen_local=16, heads=2, heads_k=2, headdim=32, causal=True, packing="qkv"),
        dict(dtype=BF16, batch=1, seqlen_local=16, heads=4, heads_k=2, headdim=32, causal=True, mesh=(1, 2)),
    ],
    3: [
        dict(dtype=BF16, batch=1, seqlen_local=16, heads=4, heads_k=2, headdim=32, causal=True),
        dict(dtype=FP16, batch=2, seqlen_local=12, heads=2, heads_k=2, headdim=64, causal=False),
        dict(dtype=BF16, batch=1, seqlen_local=16, heads=4, heads_k=2, headdim=32, causal=True, layout="contiguous"),
        dict(dtype=FP16, batch=1, seqlen_local=16, heads=4, heads_k=1, headdim=32, causal=True, packing="kv",
             deterministic=True),
    ],
    # Ulysses inside ring: head groups {0, 1}, {2, 3}; ring groups {0, 2}, {1, 3}.
    4: [
        dict(dtype=BF16, batch=1, seqlen_local=8, heads=4, heads_k=2, headdim=32, causal=True, mesh=(2, 2)),
        dict(dtype=FP16, batch=2, seqlen_local=6, heads=2, heads_k=2, headdim=32, causal=False, mesh=(2, 2)),
        dict(dtype=BF16, batch=1, seqlen_local=8, heads=4, heads_k=2, headdim=32, causal=True, mesh=(2, 2),
             layout="contiguous"),
    ],
}


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_ring_matches_whole_sequence(device, world_size, tmp_path):
    if device == "cuda" and torch.cuda.device_count() < world_size:
        pytest.skip(f"needs {world_size} GPUs for NCCL ring attention, this machine has {torch.cuda.device_count()}")
    mp.spawn(ring_worker.run_cases, args=(world_size, str(tmp_path / "rendezvous"), device, RING_CASES[world_size]),
             nprocs=world_size, join=True)


# ---- the layouts ---------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["zigzag", "contiguous"])
@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_blocks_cover_the_causal_mask_exactly(layout, world_size):
    """For every rank and every source of keys, the block plan (rows, cols, causal inside) marks
    exactly the (query, key) pairs the causal mask of the whole sequence allows."""
    seqlen = 8 * world_size
    local = seqlen // world_size
    for rank in range(world_size):
        q_pos = positions(seqlen, rank, world_size, layout)
        for source in range(world_size):
            k_pos = positions(seqlen, source, world_size, layout)
            allowed = k_pos.view(1, -1) <= q_pos.view(-1, 1)
            planned = torch.zeros(local, local, dtype=torch.bool)
            b = block(layout, True, rank, source, local, local)
            if b is not None:
                tile = planned[b.rows, b.cols]
                if b.causal:
                    n = tile.shape[0]
                    tile |= torch.ones(n, n, dtype=torch.bool).tril()
                else:
                    tile |= True
                planned[b.rows, b.cols] = tile
            assert torch.equal(planned, allowed), (layout, world_size, rank, source)


def test_zigzag_balances_causal_work():
    """Under the zigzag split every rank's share of the causal mask is the same; contiguously, not."""
    world_size, seqlen = 4, 64
    mask = torch.ones(seqlen, seqlen, dtype=torch.bool).tril()
    for layout, balanced in (("zigzag", True), ("contiguous", False)):
        work = [mask[positions(seqlen, r, world_size, layout)].sum().item() for r in range(world_size)]
        assert (len(set(work)) == 1) == balanced, (layout, work)


@pytest.mark.parametrize("layout", ["zigzag", "contiguous"])
def test_shard_unshard_round_trip(layout):
    x = torch.arange(2 * 24 * 3).view(2, 24, 3)
    pieces = [shard(x, r, 3, layout) for r in range(3)]
    assert all(p.shape == (2, 8, 3) and p.is_contiguous() for p in pieces)
    assert torch.equal(unshard(pieces, layout), x)
    assert torch.equal(zigzag_unshard([zigzag_shard(x, r, 3) for r in range(3)]), x)
    assert positions(12, 1, 3).tolist() == [2, 3, 8, 9]  # chunks 1 and 4 of 6
    grid = [[shard_2d(x, r, 2, h, 3, layout) for h in range(3)] for r in range(2)]
    assert torch.equal(unshard_2d(grid, layout), x)


def test_shard_rejects_uneven_split():
    with pytest.raises(ValueError, match="divisible by 6"):
        zigzag_shard(torch.zeros(1, 10, 2), 0, 3)
    with pytest.raises(ValueError, match="layout"):
        shard(torch.zeros(1, 8, 2), 0, 2, layout="striped")
    with pytest.raises(ValueError, match="rank"):
        shard(torch.zeros(1, 8, 2), 2, 2)


# ---- one rank, and argument errors ---------------------------------------------------------------

@pytest.fixture
def single_rank_group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("causal", [False, True])
def test_one_rank_is_flash_attn_func(single_rank_group, causal):
    """A group of one: the ring is one local call, bit for bit flash_attn_func."""
    q, k, v = (torch.randn(1, 30, 4, 32, dtype=BF16).requires_grad_() for _ in range(3))
    out = ring_flash_attn_func(q, k, v, causal=causal)
    want = flash_attn_func(q, k, v, causal=causal)
    dout = torch.randn_like(out)
    assert torch.equal(out, want)
    for got, expected in zip(torch.autograd.grad(out, (q, k, v), dout), torch.autograd.grad(want, (q, k, v), dout)):
        assert torch.equal(got, expected)


def test_ulysses_without_groups_is_flash_attn_func(single_rank_group):
    q, k, v = (torch.randn(1, 12, 4, 32, dtype=BF16).requires_grad_() for _ in range(3))
    out = ulysses_ring_flash_attn_func(q, k, v, causal=True)
    assert torch.equal(out, flash_attn_func(q, k, v, causal=True))
    with pytest.raises(ValueError, match="k: the head group has 1 ranks|rank-4"):
        ulysses_ring_flash_attn_func(q, k[0], v, causal=True)


def test_errors_name_the_argument(single_rank_group):
    q = torch.randn(1, 6, 2, 32, dtype=BF16)
    with pytest.raises(NotImplementedError, match="window_size"):
        ring_flash_attn_func(q, q, q, window_size=(4, 0))
    with pytest.raises(NotImplementedError, match="alibi_slopes"):
        ring_flash_attn_func(q, q, q, alibi_slopes=torch.ones(2))
    with pytest.raises(ValueError, match="seqlen_local must be even"):
        ring_flash_attn_func(q[:, :5], q[:, :5], q[:, :5], causal=True)
    with pytest.raises(ValueError, match="same positions"):
        ring_flash_attn_func(q, q[:, :4], q[:, :4], causal=True)
    with pytest.raises(ValueError, match="layout"):
        ring_flash_attn_func(q, q, q, layout="striped")
    with pytest.raises(ValueError, match="qkv"):
        ring_flash_attn_qkvpacked_func(torch.randn(1, 6, 2, 2, 32, dtype=BF16))
    with pytest.raises(ValueError, match="dtype"):  # float32 runs on the CPU backend; float64 nowhere
        ring_flash_attn_func(q.double(), q.double(), q.double())


def test_needs_an_initialised_process_group():
    assert not dist.is_initialized()
    q = torch.randn(1, 6, 2, 32, dtype=BF16)
    with pytest.raises(RuntimeError, match="init_process_group"):
        ring_flash_attn_func(q, q, q)


# ---- merge_partials ------------------------------------------------------------------------------

def _blocks(device, dtype):
    q = torch.randn(2, 19, 4, 64, dtype=dtype, device=device)
    k = torch.randn(2, 50, 2, 64, dtype=dtype, device=device)
    v = torch.randn(2, 50, 2, 64, dtype=dtype, device=device)
    return q, k, v


@pytest.mark.parametrize("dtype", [FP16, BF16], ids=["fp16", "bf16"])
def test_merge_partials_is_attention_over_both_blocks(device, dtype):
    from flashcore._ops import run_forward

    q, k, v = _blocks(device, dtype)
    scale = 64 ** -0.5
    out_a, lse_a = run_forward(q, k[:, :23], v[:, :23], scale, False)
    out_b, lse_b = run_forward(q, k[:, 23:], v[:, 23:], scale, False)
    out, lse = merge_partials(out_a, lse_a, out_b, lse_b)
    whole, whole_lse = run_forward(q, k, v, scale, False)
    assert out.dtype == dtype
    torch.testing.assert_close(lse, whole_lse, rtol=1e-5, atol=1e-5)  # the GPU kernels use exp2.approx
    # Two partials rounded to the dtype, merged, rounded again: within 2 ulp of the one-pass result.
    ulp = torch.finfo(dtype).eps * whole.abs().float().clamp_min(1.0)
    assert ((out.float() - whole.float()).abs() <= 2 * ulp).all()
    # Into a float32 result, in place on the b side: one rounding fewer.
    into = out_b.float()
    merge_partials(out_a, lse_a, into, lse_b, out=into, lse=lse_b)
    assert torch.equal(lse_b, lse)
    assert ((into - whole.float()).abs() <= 1.5 * ulp).all()


def test_merge_partials_formula_and_special_rows():
    out_a = torch.tensor([1.0, 2.0]).repeat(4, 1).view(1, 4, 1, 2)
    out_b = torch.tensor([10.0, 20.0]).repeat(4, 1).view(1, 4, 1, 2)
    inf = math.inf
    lse_a = torch.tensor([[[-inf, -inf, 0.5, 2.0]]])
    lse_b = torch.tensor([[[-inf, 1.0, -inf, 3.0]]])
    out, lse = merge_partials(out_a, lse_a, out_b, lse_b)
    assert out[0, 0].tolist() == [[0.0, 0.0]] and lse[0, 0, 0].item() == -inf
    assert out[0, 1].tolist() == [[10.0, 20.0]] and lse[0, 0, 1].item() == 1.0
    assert out[0, 2].tolist() == [[1.0, 2.0]] and lse[0, 0, 2].item() == 0.5
    weight_a = 1 / (1 + math.e)
    torch.testing.assert_close(out[0, 3, 0], torch.tensor([1.0, 2.0]) * weight_a + torch.tensor([10.0, 20.0]) * (1 - weight_a))
    torch.testing.assert_close(lse[0, 0, 3], torch.tensor(3.0 + math.log1p(math.exp(-1.0))))


def test_merge_partials_errors_name_the_argument():
    out = torch.zeros(1, 4, 2, 8)
    lse = torch.zeros(1, 2, 4)
    with pytest.raises(ValueError, match="lse_b"):
        merge_partials(out, lse, out, lse.double())
    with pytest.raises(ValueError, match="out_b"):
        merge_partials(out, lse, out.to(torch.int32), lse)
    with pytest.raises(ValueError, match="lse_a"):
        merge_partials(out, torch.zeros(1, 4, 2), out, lse)
    with pytest.raises(ValueError, match="out: overlaps out_a"):
        merge_partials(out[:, :3], lse[:, :, :3], out[:, 1:], lse[:, :, 1:], out=out[:, 1:])


def test_merge_partials_c_abi_rejects_null_tensors():
    """The C function itself: null descriptors and null options are an error naming the argument, not a crash."""
    from flashcore import _library as lib

    status = lib.merge_partials(None, None, None, None, None, None, None)
    assert status == lib.STATUS_INVALID_ARGUMENT
    assert "flashcore::merge_partials: out_a: is null" in lib.last_error()
