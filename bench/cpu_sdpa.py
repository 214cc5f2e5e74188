"""flashcore's CPU backend against torch's CPU scaled_dot_product_attention, in the same process.

The two are timed interleaved (flashcore, torch, flashcore, torch, ...) and each takes the median
of its calls, so load from other processes on a shared machine falls on both alike; the load
average (os.getloadavg) is recorded before and after every cell. Rows follow the GPU benchmark's
JSON shape (bench/flashbench/results.py): impl flashcore / sdpa_cpu, pass fwd / fwd_bwd.

    PYTHONPATH=python FLASHCORE_LIBRARY=build/cpu/src/c_api/libflashcore_c.so \
        .venv/bin/python bench/cpu_sdpa.py --out bench/results/cpu_<date>.json
    ... --threads 1,2 --dtypes bf16 --head-dims 64 --seqlens 1024,4096   (the scaling table)
    .venv/bin/python bench/cpu_sdpa.py --report bench/results/cpu_sdpa_*.json   (markdown table)

torch's SDPA takes (batch, heads, seqlen, head_dim) tensors and flashcore (batch, seqlen, heads,
head_dim); each gets contiguous tensors in its own layout, so neither pays for a transpose.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
flashcore = None  # imported by main(), so --report runs without the native library

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
PASS_FACTOR = {"fwd": 1.0, "fwd_bwd": 3.5}


def flops(b, h, s, d, causal, pass_):
    f = 4.0 * b * h * s * s * d
    return (f / 2 if causal else f) * PASS_FACTOR[pass_]


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        flags = fields.get("Flags", "").split()
        wanted = ["avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile"]
        return fields.get("Model name", "").strip(), {f: f in flags for f in wanted}
    except OSError:
        return platform.processor(), {}


_runtime = None  # PyTorch's OpenMP runtime's path, found once ("" when there is none)


def bind_threads(impl):
    """flashcore runs on PyTorch's OpenMP threads (the binding's default where it can) except for
    impl flashcore_pool, which runs on flashcore's own pool (flashcore._threads)."""
    from flashcore import _library as lib, _threads
    if lib.cpu_use_openmp is None:
        return
    global _runtime
    if _runtime is None:
        _runtime = _threads.torch_openmp_runtime() or ""
    runtime = _runtime if impl == "flashcore" else None
    if impl == "flashcore" and runtime is None:
        return
    lib.check(lib.cpu_use_openmp(runtime.encode() if runtime else None))


def make_calls(impl, pass_, dtype, b, h, s, d, causal):
    gen = torch.Generator().manual_seed(0)
    shape = (b, s, h, d) if impl.startswith("flashcore") else (b, h, s, d)
    q, k, v = (torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype) for _ in range(3))
    grad = torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)
    if impl.startswith("flashcore"):
        def fwd(q, k, v):
            bind_threads(impl)
            return flashcore.flash_attn_func(q, k, v, causal=causal)
    else:
        def fwd(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    if pass_ == "fwd":
        def call():
            with torch.no_grad():
                fwd(q, k, v)
        return call
    qg, kg, vg = (t.clone().requires_grad_(True) for t in (q, k, v))

    def call():
        out = fwd(qg, kg, vg)
        out.backward(grad)
        qg.grad = kg.grad = vg.grad = None
    return call


def time_pair(calls, reps, warmup):
    for call in calls.values():
        for _ in range(warmup):
            call()
    times = {name: [] for name in calls}
    cpu_times = {name: [] for name in calls}
    for _ in range(reps):
        for name, call in calls.items():
            c0 = time.process_time()
            t0 = time.perf_counter()
            call()
            times[name].append((time.perf_counter() - t0) * 1e3)
            cpu_times[name].append((time.process_time() - c0) * 1e3)
    return times, cpu_times


def report(paths):
    """A markdown table of flashcore's speed-up over torch (wall and CPU time) from result files."""
    print("| threads | dtype | d | S | causal | pass | flashcore ms | sdpa_cpu ms | speed-up (wall) | speed-up (CPU time) "
          "| load | commit |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for path in paths:
        with open(path) as f:
            result = json.load(f)
        rows = result["rows"]
        commit = result["context"].get("commit", "")
        for fc in (r for r in rows if r["impl"] == "flashcore"):
            key = ("threads", "dtype", "head_dim", "seqlen_q", "causal", "pass")
            torch_row = next(r for r in rows if r["impl"] == "sdpa_cpu" and all(r[k] == fc[k] for k in key))
            print(f"| {fc['threads']} | {fc['dtype']} | {fc['head_dim']} | {fc['seqlen_q']} | {int(fc['causal'])} | "
                  f"{fc['pass']} | {fc['ms']:.1f} | {torch_row['ms']:.1f} | {torch_row['ms'] / fc['ms']:.2f}x | "
                  f"{torch_row['cpu_ms'] / fc['cpu_ms']:.2f}x | {fc['loadavg'][0]:.1f} | {commit} |")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--report":
        report(sys.argv[2:])
        return
    global flashcore
    import flashcore as _flashcore
    flashcore = _flashcore
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="results JSON (bench/results/*cpu*.json)")
    ap.add_argument("--dtypes", default="bf16,fp16,fp32")
    ap.add_argument("--head-dims", default="64,128")
    ap.add_argument("--seqlens", default="1024,4096")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--passes", default="fwd,fwd_bwd")
    ap.add_argument("--threads", default=str(torch.get_num_threads()),
                    help="comma-separated thread counts (torch.set_num_threads; flashcore follows it)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--quiet-load", type=float, default=None,
                    help="before the first cell, wait until the 1-minute load average is below this (a shared "
                         "machine: timings mean little while others compile), at most --quiet-wait seconds; only "
                         "at the start, since the run's own threads then count in the load average")
    ap.add_argument("--quiet-wait", type=float, default=600.0)
    ap.add_argument("--with-pool", action="store_true",
                    help="also time impl flashcore_pool (flashcore's own thread pool instead of PyTorch's OpenMP "
                         "threads), each followed by a second SDPA call (sdpa_cpu_again), so every flashcore call "
                         "follows a torch op as a user's would")
    args = ap.parse_args()

    wait_for_quiet(args)
    model, flags = cpu_model()
    ctx = {
        "date": datetime.date.today().isoformat(),
        "time_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "mode": "cpu_sdpa",
        "device": "cpu",
        "cpu_model": model,
        "cpu_flags": flags,
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_mkldnn": torch.backends.mkldnn.is_available(),
        "python": platform.python_version(),
        "flashcore": flashcore.__version__,
        "flashcore_library": os.environ.get("FLASHCORE_LIBRARY"),
        "loadavg_start": os.getloadavg(),
        # torch's OpenMP threads spin after each of its parallel regions unless told to sleep; a
        # spinning thread takes the core flashcore's next call wants (docs/tuning/cpu.md, v9).
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "gomp_spincount": os.environ.get("GOMP_SPINCOUNT"),
    }
    try:
        ctx["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                       cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except OSError:
        pass
    impls = ["flashcore", "sdpa_cpu"] + (["flashcore_pool", "sdpa_cpu_again"] if args.with_pool else [])
    ctx["flashcore_threads"] = {"flashcore": flashcore.cpu_threads, "flashcore_pool": "pool"}
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        for dt in args.dtypes.split(","):
            for d in [int(x) for x in args.head_dims.split(",")]:
                for s in [int(x) for x in args.seqlens.split(",")]:
                    for causal in [bool(int(x)) for x in args.causal.split(",")]:
                        for pass_ in args.passes.split(","):
                            load0 = os.getloadavg()[0]
                            calls = {impl: make_calls(impl, pass_, DTYPES[dt], args.batch, args.heads, s, d, causal)
                                     for impl in impls}
                            times, cpu_times = time_pair(calls, args.reps, args.warmup)
                            load1 = os.getloadavg()[0]
                            ms = {k: statistics.median(v) for k, v in times.items()}
                            cpu_ms = {k: statistics.median(v) for k, v in cpu_times.items()}
                            for impl in calls:
                                rows.append({
                                    "suite": "cpu_sdpa", "impl": impl, "kernels": "cpu" if impl.startswith("flashcore") else None,
                                    "pass": pass_, "dtype": dt, "head_dim": d, "causal": causal, "batch": args.batch,
                                    "heads": args.heads, "heads_kv": args.heads, "seqlen_q": s, "seqlen_k": s,
                                    "ms": ms[impl], "tflops": flops(args.batch, args.heads, s, d, causal, pass_)
                                    / (ms[impl] * 1e-3) / 1e12,
                                    "reason": None, "threads": threads, "runs": args.reps,
                                    "ms_all": [round(t, 3) for t in times[impl]], "loadavg": [load0, load1],
                                    "cpu_ms": cpu_ms[impl],
                                })
                            ratio = ms["sdpa_cpu"] / ms["flashcore"]
                            print(f"t={threads} {dt} d{d} s{s} causal={int(causal)} {pass_:7s} "
                                  f"flashcore {ms['flashcore']:8.2f} ms  sdpa {ms['sdpa_cpu']:8.2f} ms  "
                                  f"speed-up {ratio:5.2f}x  (CPU time {cpu_ms['sdpa_cpu'] / cpu_ms['flashcore']:5.2f}x)  "
                                  + (f"pool {ms['flashcore_pool']:8.2f} ms ({ms['sdpa_cpu_again'] / ms['flashcore_pool']:5.2f}x)  "
                                     if args.with_pool else "")
                                  + f"load {load0:.2f}->{load1:.2f}", flush=True)
                            save(args, ctx, rows, complete=False)
    save(args, ctx, rows, complete=True)


def wait_for_quiet(args):
    """Sleeps until the 1-minute load average drops below --quiet-load (or --quiet-wait runs out)."""
    if args.quiet_load is None:
        return
    deadline = time.monotonic() + args.quiet_wait
    while os.getloadavg()[0] >= args.quiet_load and time.monotonic() < deadline:
        time.sleep(5)


def save(args, ctx, rows, complete):
    """Writes the results so far (after every cell, so a run cut short keeps what it measured)."""
    if not args.out:
        return
    ctx = dict(ctx, loadavg_end=os.getloadavg(), complete=complete)
    result = {"schema": "flashbench/2", "context": ctx,
              "settings": {k: v for k, v in vars(args).items() if k != "out"},
              "method": ("wall time per call (time.perf_counter), flashcore and torch SDPA alternated call by call "
                         "in one process, median of --reps each after --warmup; fresh torch.randn inputs per cell; "
                         "cpu_ms = median process CPU time per call (all threads; less sensitive to other "
                         "processes' load than wall time); "
                         "fwd under no_grad, fwd_bwd = forward + out.backward(grad); threads = "
                         "torch.set_num_threads (flashcore's Python binding passes torch.get_num_threads()); "
                         "FLOPs: fwd 4*B*H*S*S*D (halved when causal), fwd_bwd 3.5x."),
              "restarts": [], "rows": rows, "memory": []}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    if complete:
        print("wrote", args.out)


if __name__ == "__main__":
    main()
