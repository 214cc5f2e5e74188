"""Ring attention (flashcore.distributed) on the GPUs of one host: issue 17's correctness check and
scaling benchmark, written to one JSON file (bench/results/ring_<device>-x<gpus>_<date>_<commit>.json).

    PYTHONPATH=python python3 bench/ring.py [check] [bench] [--world-size 2] [--out-dir DIR]

One process per GPU, NCCL between them. NVLink multicast (NVLS) is switched off here whatever the
caller's environment says (NCCL_NVLS_ENABLE=0 and its PyTorch / NVSHMEM twins): on the lent
machines it can take the host's GPUs out of service.

check   ring attention on each rank's shard against attention on the whole sequence, under
        FlashAttention's rule: the float64 reference and a plain same-precision implementation run
        on the GPU, single-GPU flashcore too (python/tests/ring_worker.py's check_case), forward and
        gradients, causal and not, GQA, both layouts, fp16 and bf16. Every rank's records are kept.
bench   for each total sequence length (32k, 64k, 128k by default; bf16, head dim 128, 32 heads,
        causal, zigzag): flashcore on one GPU over the whole sequence, then ring attention on
        world_size GPUs three ways: with NCCL (`comm: nccl`), without any sends (`comm: none`, every
        rank computes on its own K/V: the same kernels, no transfer) and the transfers alone
        (`comm: only`, the attention calls replaced by allocations). Forward, and forward +
        backward. Each rep starts after a barrier; its time is the slowest rank's CUDA-event time;
        the row's `ms` is the median over reps. Derived per ring row: `efficiency` = t(1 GPU) /
        (world_size * t(ring)), 1.0 being perfect scaling on the same total work, and for the nccl
        rows `hidden` = 1 - (t(nccl) - t(none)) / t(only), the share of the transfer time that
        compute covered. Plus a contiguous-layout row (the imbalance zigzag removes), GQA rows, and
        the raw ring exchange bandwidth (`links`) the docs/context_parallelism.md model uses, and
        head parallelism alone (Ulysses all-to-all over all the GPUs, `flashcore_ulysses`) at the
        longest seqlen for comparison.
"""

import argparse
import contextlib
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import time

# Before torch (and NCCL) load: never NVLink multicast on these machines.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path[:0] = [os.path.join(REPO, "python"), os.path.join(REPO, "python", "tests"), os.path.join(REPO, "bench")]

BF16, FP16 = torch.bfloat16, torch.float16

# GPU-sized versions of the CI cases (python/tests/test_distributed.py): long enough for many tiles
# per block and for the zigzag halves to be whole kernel tiles, small enough for the float64
# reference of the whole sequence (a few GB of scores on the GPU).
CHECK_CASES = [
    dict(dtype=BF16, batch=1, seqlen_local=2048, heads=8, heads_k=8, headdim=128, causal=True),
    dict(dtype=BF16, batch=1, seqlen_local=2048, heads=16, heads_k=4, headdim=128, causal=True),
    dict(dtype=FP16, batch=1, seqlen_local=2048, heads=8, heads_k=2, headdim=128, causal=True),
    dict(dtype=BF16, batch=2, seqlen_local=1024, heads=8, heads_k=8, headdim=128, causal=False),
    dict(dtype=FP16, batch=2, seqlen_local=1024, heads=8, heads_k=2, headdim=64, causal=False),
    dict(dtype=BF16, batch=1, seqlen_local=2048, heads=8, heads_k=8, headdim=128, causal=True, layout="contiguous"),
    dict(dtype=BF16, batch=1, seqlen_local=1000, heads=8, heads_k=2, headdim=64, causal=True),  # ragged tiles
    dict(dtype=FP16, batch=1, seqlen_local=1024, heads=8, heads_k=8, headdim=64, causal=True, softcap=5.0),
    dict(dtype=BF16, batch=1, seqlen_local=1024, heads=8, heads_k=8, headdim=128, causal=True, packing="qkv"),
    dict(dtype=BF16, batch=1, seqlen_local=2048, heads=8, heads_k=2, headdim=128, causal=True, mesh=(1, 2)),  # Ulysses
]

# --cpu's smoke run of this script: the CI cases' sizes.
CPU_CHECK_CASES = [
    dict(dtype=BF16, batch=1, seqlen_local=32, heads=4, heads_k=2, headdim=64, causal=True),
    dict(dtype=FP16, batch=1, seqlen_local=24, heads=4, heads_k=4, headdim=32, causal=False),
    dict(dtype=BF16, batch=1, seqlen_local=16, heads=4, heads_k=2, headdim=32, causal=True, mesh=(1, 2)),
]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return f"{cmd[0]}: {e}"


# ---- check ---------------------------------------------------------------------------------------

def run_check(rank, world_size, device, cpu_group, cases):
    import ring_worker

    records = []
    for case in cases:
        started = time.perf_counter()
        try:
            found = ring_worker.check_case(rank, world_size, device, reference_device=device, strict=False, **case)
            reason = None
        except Exception as e:  # recorded, and the other cases still run
            found, reason = [], f"{type(e).__name__}: {e}"[:500]
        _empty_cache()
        case_text = {k: (str(v).replace("torch.", "") if isinstance(v, torch.dtype) else v) for k, v in case.items()}
        records.append(dict(case=case_text, rank=rank, seconds=round(time.perf_counter() - started, 2),
                            ok=reason is None and all(r["ok"] for r in found), reason=reason, tensors=found))
    gathered = [None] * world_size
    dist.all_gather_object(gathered, records, group=cpu_group)
    return [r for per_rank in gathered for r in per_rank]


# ---- bench ---------------------------------------------------------------------------------------

# A hang (a rank that died, a deadlock) ends the run after this instead of at the device's limit.
_TIMEOUT = datetime.timedelta(minutes=4)

# Where the run's tensors live: the GPU of the rank, or the CPU for --cpu's smoke run of this script.
_DEVICE = None


def _on_gpu():
    return _DEVICE.type == "cuda"


def _empty_cache():
    if _on_gpu():
        torch.cuda.empty_cache()


def _elapsed_ms(fn):
    """fn()'s time: CUDA events on the GPU (the device's time, the launches included), the wall
    clock on the CPU."""
    if not _on_gpu():
        started = time.perf_counter()
        fn()
        return (time.perf_counter() - started) * 1e3
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def _warm_up(fn, warmup):
    for _ in range(warmup):
        fn()
    if _on_gpu():
        torch.cuda.synchronize()


def _time_ms(fn, reps, cpu_group, warmup=1):
    """Median over reps of the slowest rank's time of fn(), every rep starting after a barrier."""
    _warm_up(fn, warmup)
    samples = []
    for _ in range(reps):
        dist.barrier(group=cpu_group)
        slowest = torch.tensor([_elapsed_ms(fn)], dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=cpu_group)
        samples.append(slowest.item())
    return statistics.median(samples), samples


@contextlib.contextmanager
def _attention_stubbed():
    """ring_attention's library calls replaced by allocations of their outputs: what is left of the
    ring is its transfers (and the small float32 sums), timed as `comm: only`."""
    from flashcore.distributed import ring_attention as ra

    saved = ra.run_forward, ra.run_backward, ra.run_merge

    def forward(q, k, v, *args, **kwargs):
        return torch.empty_like(q), q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)

    def backward(dout, q, k, v, *args, **kwargs):
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    ra.run_forward, ra.run_backward, ra.run_merge = forward, backward, lambda *args: None
    try:
        yield
    finally:
        ra.run_forward, ra.run_backward, ra.run_merge = saved


def _kernels(q, k, v, pass_):
    try:
        from flashbench.families import Selector
        return Selector().row_fields(torch, pass_, q, k, v, True)
    except Exception as e:
        return {"kernels": None, "kernels_note": f"{type(e).__name__}: {e}"[:200]}


def _row(impl, pass_, seqlen, heads, heads_kv, head_dim, ms, samples, world_size, **extra):
    from flashbench.flops import attention_flops, tflops

    flops = attention_flops(1, heads, seqlen, seqlen, head_dim, True, pass_)
    row = {"impl": impl, "kernels": None, "pass": pass_, "dtype": "bf16", "head_dim": head_dim, "causal": True,
           "batch": 1, "heads": heads, "heads_kv": heads_kv, "seqlen_q": seqlen, "seqlen_k": seqlen, "ms": ms,
           "tflops": tflops(flops, ms) if ms else None, "reason": None, "world_size": world_size,
           "samples_ms": [round(s, 4) for s in samples]}
    row.update(extra)
    return row


def bench_single(rank, seqlen, heads, heads_kv, head_dim, reps, cpu_group):
    """flashcore on one GPU over the whole sequence (rank 0; the others wait at the barriers)."""
    from flashcore import flash_attn_func

    rows = []
    if rank == 0:
        make = lambda h: torch.randn(1, seqlen, h, head_dim, dtype=BF16, device=_DEVICE)
        q, k, v = make(heads), make(heads_kv), make(heads_kv)
        dout = torch.randn_like(q)
        for pass_ in ("fwd", "fwd_bwd"):
            if pass_ == "fwd":
                def fn():
                    with torch.no_grad():
                        flash_attn_func(q, k, v, causal=True)
            else:
                leaves = [t.clone().requires_grad_() for t in (q, k, v)]

                def fn():  # autograd.grad: no .grad accumulation inside the timed call
                    torch.autograd.grad(flash_attn_func(*leaves, causal=True), leaves, dout)
            ms, samples = _time_ms_alone(fn, reps)
            rows.append(_row("flashcore", pass_, seqlen, heads, heads_kv, head_dim, ms, samples, 1,
                             **_kernels(q, k, v, pass_)))
        del q, k, v, dout
        _empty_cache()
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, rows, group=cpu_group)
    return gathered[0]


def _time_ms_alone(fn, reps, warmup=1):
    """Median over reps of fn()'s time on this rank alone."""
    _warm_up(fn, warmup)
    samples = [_elapsed_ms(fn) for _ in range(reps)]
    return statistics.median(samples), samples


def bench_ring(rank, world_size, seqlen, heads, heads_kv, head_dim, reps, cpu_group, layout="zigzag",
               modes=("nccl", "none", "only")):
    from flashcore.distributed.comm import LocalComm, RingComm
    from flashcore.distributed.ring_attention import RingAttention, ring_forward

    local = seqlen // world_size
    make = lambda h: torch.randn(1, local, h, head_dim, dtype=BF16, device=_DEVICE)
    q, k, v = make(heads), make(heads_kv), make(heads_kv)
    dout = torch.randn_like(q)
    scale = head_dim ** -0.5
    rows = []
    for mode in modes:
        comm = LocalComm(rank, world_size) if mode == "none" else RingComm()
        for pass_ in ("fwd", "fwd_bwd"):
            if pass_ == "fwd":
                def fn():
                    with torch.no_grad():
                        ring_forward(q, k, v, scale, True, 0.0, layout, comm)
            else:
                leaves = [t.clone().requires_grad_() for t in (q, k, v)]

                def fn():
                    torch.autograd.grad(RingAttention.apply(*leaves, scale, True, 0.0, False, layout, comm), leaves,
                                        dout)
            with _attention_stubbed() if mode == "only" else contextlib.nullcontext():
                ms, samples = _time_ms(fn, reps, cpu_group)
            rows.append(_row("flashcore_ring", pass_, seqlen, heads, heads_kv, head_dim, ms, samples, world_size,
                             layout=layout, comm=mode, seqlen_local=local, **_kernels(q, k, v, pass_)))
    del q, k, v, dout
    _empty_cache()
    return rows


def bench_ulysses(rank, world_size, seqlen, heads, heads_kv, head_dim, reps, cpu_group):
    """Head parallelism alone over every rank (ulysses_ring_flash_attn_func with one head group and
    no ring): for comparison with the ring on the same GPUs."""
    from flashcore.distributed import ulysses_ring_flash_attn_func

    local = seqlen // world_size
    make = lambda h: torch.randn(1, local, h, head_dim, dtype=BF16, device=_DEVICE)
    q, k, v = make(heads), make(heads_kv), make(heads_kv)
    dout = torch.randn_like(q)
    group = dist.group.WORLD
    rows = []
    for pass_ in ("fwd", "fwd_bwd"):
        if pass_ == "fwd":
            def fn():
                with torch.no_grad():
                    ulysses_ring_flash_attn_func(q, k, v, causal=True, head_group=group)
        else:
            leaves = [t.clone().requires_grad_() for t in (q, k, v)]

            def fn():
                torch.autograd.grad(ulysses_ring_flash_attn_func(*leaves, causal=True, head_group=group), leaves, dout)
        ms, samples = _time_ms(fn, reps, cpu_group)
        rows.append(_row("flashcore_ulysses", pass_, seqlen, heads, heads_kv, head_dim, ms, samples, world_size,
                         comm="nccl", seqlen_local=local))
    del q, k, v, dout
    _empty_cache()
    return rows


def bench_link(rank, world_size, cpu_group, sizes_mib=(64, 256, 1024)):
    """The ring exchange alone: every rank sends `size` bytes to the next and receives as many from
    the previous one, at once (what one step of the ring does)."""
    from flashcore.distributed.comm import RingComm

    comm = RingComm()
    rows = []
    for mib in sizes_mib:
        buffer = torch.empty(mib * 2**20 // 2, dtype=BF16, device=_DEVICE)
        ms, samples = _time_ms(lambda: comm.exchange([buffer]).wait(), 5, cpu_group, warmup=2)
        rows.append(dict(impl="ring_exchange", mib=mib, ms=ms, samples_ms=[round(s, 4) for s in samples],
                         gb_per_s=mib * 2**20 / (ms * 1e-3) / 1e9, world_size=world_size))
        del buffer
    return rows


def derive(rows, world_size):
    """efficiency and hidden on the ring rows, from the one-GPU and comm rows of the same shape."""
    def find(**want):
        for r in rows:
            if all(r.get(k) == v for k, v in want.items()):
                return r
        return None

    for r in rows:
        if r.get("impl") not in ("flashcore_ring", "flashcore_ulysses") or not r.get("ms"):
            continue
        key = {"pass": r["pass"], "seqlen_q": r["seqlen_q"], "heads_kv": r["heads_kv"]}
        one = find(impl="flashcore", **key)
        if one and one.get("ms") and r["comm"] != "only":
            r["efficiency"] = one["ms"] / (world_size * r["ms"])
        if r["comm"] == "nccl" and r["impl"] == "flashcore_ring":
            none = find(impl="flashcore_ring", comm="none", layout=r["layout"], **key)
            only = find(impl="flashcore_ring", comm="only", layout=r["layout"], **key)
            if none and only and only.get("ms"):
                r["exposed_comm_ms"] = r["ms"] - none["ms"]
                r["comm_only_ms"] = only["ms"]
                r["hidden"] = 1.0 - r["exposed_comm_ms"] / only["ms"]


def run_bench(rank, world_size, args, cpu_group, result, save):
    """Fills result["links"] (the exchange bandwidth) and result["rows"] (the timings), saving after
    each shape so that a run cut short keeps what it measured."""
    if rank == 0:
        print("bench: link", flush=True)
    result["links"] = bench_link(rank, world_size, cpu_group, (1, 4) if args.cpu else (64, 256, 1024))
    rows = result["rows"] = []
    for seqlen in args.seqlens:
        for heads_kv in ([args.heads] + ([args.gqa_heads_kv] if seqlen == max(args.seqlens) else [])):
            if rank == 0:
                print(f"bench: seqlen {seqlen}, heads {args.heads}/{heads_kv}", flush=True)
            rows += bench_single(rank, seqlen, args.heads, heads_kv, args.head_dim, args.reps, cpu_group)
            rows += bench_ring(rank, world_size, seqlen, args.heads, heads_kv, args.head_dim, args.reps, cpu_group)
            derive(rows, world_size)
            save()
    if rank == 0:
        print("bench: contiguous layout", flush=True)
    seqlen = max(args.seqlens)
    rows += bench_ring(rank, world_size, seqlen, args.heads, args.heads, args.head_dim, args.reps, cpu_group,
                       layout="contiguous", modes=("nccl",))
    if rank == 0:
        print("bench: Ulysses", flush=True)
    for heads_kv in (args.heads, args.gqa_heads_kv):
        if args.heads % world_size == 0 and heads_kv % world_size == 0:
            rows += bench_ulysses(rank, world_size, seqlen, args.heads, heads_kv, args.head_dim, args.reps, cpu_group)
    derive(rows, world_size)
    save()


# ---- the processes -------------------------------------------------------------------------------

def context(world_size):
    from flashbench import context as ctx

    import flashcore

    c = ctx.base_context("ring")
    if _on_gpu():
        c.update(ctx.torch_context(torch))
        try:
            nccl = str(torch.cuda.nccl.version())
        except Exception as e:  # recorded, never fatal
            nccl = f"unknown: {type(e).__name__}: {e}"
        c.update(gpus=[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())], nccl=nccl,
                 topology=_run(["nvidia-smi", "topo", "-m"]))
    else:
        c.update(device="cpu", torch=torch.__version__, note="--cpu smoke run: gloo, CPU tensors, wall-clock times")
    c.update(world_size=world_size, flashcore=flashcore.__version__,
             env={k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                                 "NVSHMEM_DISABLE_NVLS", "FLASHCORE_KERNELS", "FLASHCORE_LIBRARY")})
    c["run_name"] = "ring_" + ctx.run_name(c).replace("_", f"-x{world_size}_", 1)
    return c


def worker(rank, world_size, port, args):
    global _DEVICE
    if args.cpu:
        _DEVICE = torch.device("cpu")
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                                timeout=_TIMEOUT)
    else:
        torch.cuda.set_device(rank)
        _DEVICE = torch.device("cuda", rank)
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                                device_id=_DEVICE, timeout=_TIMEOUT)
    cpu_group = dist.new_group(backend="gloo", timeout=_TIMEOUT)
    result = {}

    def save():
        """rank 0 writes what the run has so far (again at every stage, the same file)."""
        if rank != 0:
            return None
        result["context"]["seconds"] = round(time.perf_counter() - started, 1)
        path = os.path.join(args.out_dir, result["context"]["run_name"] + ".json")
        os.makedirs(args.out_dir, exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1, default=str)
        os.replace(path + ".tmp", path)
        return path

    started = time.perf_counter()
    try:
        if rank == 0:
            result["context"] = context(world_size)
            result["method"] = __doc__
            result["settings"] = {k: v for k, v in vars(args).items() if k != "steps"} | {"steps": args.steps}
        if "check" in args.steps:
            result["check"] = run_check(rank, world_size, _DEVICE, cpu_group,
                                        CPU_CHECK_CASES if args.cpu else CHECK_CASES)
            if rank == 0:
                bad = [r for r in result["check"] if not r["ok"]]
                print(f"check: {len(result['check']) - len(bad)}/{len(result['check'])} (case, rank) records pass",
                      flush=True)
                for r in bad:
                    print(f"  FAIL {r['case']} rank {r['rank']}: {r['reason'] or [t for t in r['tensors'] if not t['ok']]}")
            save()
        if "bench" in args.steps:
            run_bench(rank, world_size, args, cpu_group, result, save)
        if rank == 0:
            print(f"wrote {save()}")
            summarize(result)
            if any(not r["ok"] for r in result.get("check", [])):
                raise SystemExit("bench/ring.py: the correctness check failed (the JSON has every record)")
    finally:
        dist.destroy_process_group()


def summarize(result):
    for r in result.get("links", []):
        print(f"exchange {r['mib']:5d} MiB: {r['ms']:8.3f} ms  {r['gb_per_s']:7.1f} GB/s each way")
    for r in result.get("rows", []):
        extra = ""
        if "efficiency" in r:
            extra += f"  efficiency {r['efficiency']:.3f}"
        if "hidden" in r:
            extra += f"  hidden {r['hidden']:.3f} (exposed {r['exposed_comm_ms']:.2f} of {r['comm_only_ms']:.2f} ms)"
        print(f"{r['impl']:15s} x{r['world_size']} {r.get('layout', ''):10s} {r.get('comm', ''):5s} {r['pass']:7s} "
              f"S={r['seqlen_q']:6d} H={r['heads']}/{r['heads_kv']} {r['ms']:9.2f} ms {r['tflops'] or 0:7.1f} TFLOP/s"
              f"{extra}")


def main():
    p = argparse.ArgumentParser(prog="bench/ring.py", description=__doc__.split("\n\n")[0])
    p.add_argument("steps", nargs="*", default=["check", "bench"], choices=["check", "bench"])
    p.add_argument("--world-size", type=int, default=None, help="processes, one GPU each (default: every GPU)")
    p.add_argument("--seqlens", default="32768,65536,131072", help="total tokens, comma-separated")
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--gqa-heads-kv", type=int, default=8, help="kv heads of the extra GQA rows at the longest seqlen")
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--out-dir", default=os.path.join(REPO, "bench", "results"))
    p.add_argument("--cpu", action="store_true",
                   help="smoke-test this script without GPUs: gloo, CPU tensors, small check cases, wall-clock "
                        "times (pass small --seqlens/--heads/--head-dim too); the numbers mean nothing")
    args = p.parse_args()
    args.steps = args.steps or ["check", "bench"]
    args.seqlens = [int(s) for s in args.seqlens.split(",") if s]
    world_size = args.world_size or (2 if args.cpu else torch.cuda.device_count())
    if world_size < 2:
        sys.exit(f"bench/ring.py: needs at least 2 GPUs, this machine shows {torch.cuda.device_count()}")
    for s in args.seqlens:
        if s % (2 * world_size):
            sys.exit(f"bench/ring.py: --seqlens: {s} does not split into {2 * world_size} zigzag chunks")
    mp.spawn(worker, args=(world_size, _free_port(), args), nprocs=world_size, join=True)


if __name__ == "__main__":
    main()
