"""What each process of test_distributed.py's process groups runs: ring attention on its shard of a
sequence, checked against attention on the whole sequence.

Every rank draws the same whole-sequence q, k, v and dout (same seed), runs ring attention on its
shard (forward and backward), and compares its shard of out, dq, dk and dv with the same shard of
  - the float64 reference on the whole sequence, under FlashAttention's rule: the error may be at
    most 2x (forward) / 3x (gradients) the largest error of a plain same-precision implementation
    over the whole sequence, plus 2 ulp at the whole result's magnitude;
  - single-process flashcore on the whole sequence, within that same bound.
A failed assertion raises in the child, and torch.multiprocessing.spawn re-raises it in the test.
"""

import torch
import torch.distributed as dist

import reference
from flashcore import flash_attn_func
from flashcore.distributed import (ring_flash_attn_func, ring_flash_attn_kvpacked_func,
                                   ring_flash_attn_qkvpacked_func, shard, shard_2d, ulysses_ring_flash_attn_func)


def _compare(name, got, ref64, plain, single, factor, split):
    """got: this rank's shard (split(whole) gives it); ref64, plain, single: whole-sequence results.
    A record of the errors against the bound (pass or not)."""
    bound = factor * (plain.double() - ref64).abs().max().item() + reference.noise_floor(ref64, got.dtype)
    got = got.double().to(ref64.device)
    error = (got - split(ref64)).abs().max().item()
    apart = (got - split(single.double().to(ref64.device))).abs().max().item()
    finite = bool(torch.isfinite(got).all())
    return dict(name=name, error=error, from_single=apart, bound=bound,
                ok=finite and error <= bound and apart <= bound)


def check_case(rank, world_size, device, dtype, batch, seqlen_local, heads, heads_k, headdim, causal,
               layout="zigzag", softcap=0.0, packing=None, deterministic=False, reference_device="cpu", strict=True,
               mesh=None):
    """Records (one per tensor: out, dq, dk, dv) of this rank's errors; with strict, an
    AssertionError at the first that breaks the rule. reference_device: where the float64 and
    plain whole-sequence attention run (a GPU for long sequences). mesh: (ring_size, head_size) to
    run ulysses_ring_flash_attn_func on that mesh instead of ring attention over every rank."""
    seqlen = seqlen_local * world_size
    generator = torch.Generator().manual_seed(1000 * world_size + seqlen_local + heads + heads_k + int(causal))
    draw = lambda *shape: torch.randn(*shape, generator=generator).to(dtype)
    q, k, v = draw(batch, seqlen, heads, headdim), draw(batch, seqlen, heads_k, headdim), draw(batch, seqlen, heads_k, headdim)
    dout = draw(batch, seqlen, heads, headdim)
    options = dict(causal=causal, softcap=softcap)

    # Ring attention on this rank's shard.
    split = lambda t: shard(t, rank, world_size, layout)
    attend = lambda *qkv: ring_flash_attn_func(*qkv, layout=layout, deterministic=deterministic, **options)
    if mesh is not None:
        split, attend = _mesh(rank, world_size, mesh, layout, dict(deterministic=deterministic, **options))
    local = [split(t).to(device) for t in (q, k, v)]
    dout_local = split(dout).to(device)
    if packing == "qkv":
        qkv = torch.stack(local, dim=2).requires_grad_()
        out = ring_flash_attn_qkvpacked_func(qkv, layout=layout, deterministic=deterministic, **options)
        grads = torch.autograd.grad(out, qkv, dout_local)[0].unbind(dim=2)
    elif packing == "kv":
        q_local = local[0].requires_grad_()
        kv = torch.stack(local[1:], dim=2).requires_grad_()
        out = ring_flash_attn_kvpacked_func(q_local, kv, layout=layout, deterministic=deterministic, **options)
        dq, dkv = torch.autograd.grad(out, (q_local, kv), dout_local)
        grads = (dq, *dkv.unbind(dim=2))
    else:
        leaves = [t.requires_grad_() for t in local]
        out = attend(*leaves)
        grads = torch.autograd.grad(out, leaves, dout_local)
    assert out.shape == local[0].shape and out.dtype == dtype and out.device == local[0].device

    # The whole sequence: float64 reference, plain same-precision attention, single-process flashcore.
    on_ref = [t.to(reference_device) for t in (q, k, v)]
    leaves64 = [t.double().requires_grad_() for t in on_ref]
    leaves_plain = [t.clone().requires_grad_() for t in on_ref]
    out64, _ = reference.attention(*leaves64, **options)
    out_plain, _ = reference.attention(*leaves_plain, upcast=False, **options)
    grads64 = torch.autograd.grad(out64, leaves64, dout.to(reference_device).double())
    grads_plain = torch.autograd.grad(out_plain, leaves_plain, dout.to(reference_device))
    del leaves64, leaves_plain
    leaves_single = [t.to(device).requires_grad_() for t in (q, k, v)]
    out_single = flash_attn_func(*leaves_single, **options)
    grads_single = torch.autograd.grad(out_single, leaves_single, dout.to(device))

    records = [_compare("out", out.detach(), out64.detach(), out_plain.detach(), out_single.detach(),
                        reference.FORWARD_FACTOR, split)]
    for name, got, g64, gplain, gsingle in zip(("dq", "dk", "dv"), grads, grads64, grads_plain, grads_single):
        records.append(_compare(name, got, g64, gplain, gsingle, reference.GRADIENT_FACTOR, split))
    for r in records:
        if strict and not r["ok"]:
            raise AssertionError(f"rank {rank}: {r['name']}: max error {r['error']:.3e} vs float64, "
                                 f"{r['from_single']:.3e} from single-process flashcore; the rule's bound is "
                                 f"{r['bound']:.3e} (or NaN/inf)")
    return records


def _mesh(rank, world_size, mesh, layout, options):
    """(split, attend) for a (ring_size x head_size) mesh: head groups of consecutive ranks (a node's
    GPUs), ring groups across them. Every rank makes every group, as torch.distributed requires."""
    ring_size, head_size = mesh
    assert ring_size * head_size == world_size
    ring_rank, head_rank = divmod(rank, head_size)
    head_groups = [dist.new_group(list(range(i * head_size, (i + 1) * head_size))) for i in range(ring_size)]
    ring_groups = [dist.new_group(list(range(j, world_size, head_size))) for j in range(head_size)]
    groups = dict(head_group=head_groups[ring_rank] if head_size > 1 else None,
                  ring_group=ring_groups[head_rank] if ring_size > 1 else None)
    split = lambda t: shard_2d(t, ring_rank, ring_size, head_rank, head_size, layout)
    attend = lambda *qkv: ulysses_ring_flash_attn_func(*qkv, layout=layout, **groups, **options)
    return split, attend


def run_cases(rank, world_size, init_file, device, cases):
    """torch.multiprocessing.spawn's entry point: joins the group, runs every case, leaves."""
    torch.set_num_threads(1)  # the processes share the machine's cores
    options = {}
    if device == "cuda":
        torch.cuda.set_device(rank)
        options["device_id"] = torch.device("cuda", rank)  # NCCL communicators made now, one GPU per rank
    dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world_size, **options)
    try:
        for case in cases:
            try:
                check_case(rank, world_size, torch.device(device, rank) if device == "cuda" else device, **case)
            except AssertionError as e:
                raise AssertionError(f"{case}: {e}") from None
    finally:
        dist.destroy_process_group()
