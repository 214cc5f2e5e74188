"""Per-call overhead of flashcore's PyTorch binding, next to SDPA's, eager forward and forward+backward.

For each shape and pass it times, per call:
  c_abi      the library called directly through ctypes with prebuilt descriptors and preallocated
             outputs (and, for fwd+bwd, workspace): the work itself plus one C call per library call,
             the floor any binding sits on;
  flashcore  flashcore.flash_attn_func (argument checks, output allocation, the autograd Function);
  sdpa_*     torch.nn.functional.scaled_dot_product_attention on the same tensors, with PyTorch's
             choice of backend (sdpa_auto) and with each backend forced (flash, efficient, cudnn, math)
             where it serves the call (otherwise the row says why not).
fwd+bwd is out = attention(q, k, v); out.backward(dout) through autograd (c_abi: the two library calls).
binding overhead = flashcore - c_abi; for fwd+bwd that includes autograd's engine, which c_abi does not
go through and SDPA does (most of fwd+bwd on the H100: docs/tuning/binding_overhead.md), so there the
SDPA rows are the comparison. On CUDA, "host" is the time to issue a call (what the Python
thread spends; the overhead lives there) and "wall" the steady-state time per call including the
GPU work (CUDA events around each batch of calls). Each figure is the median (p50) and p90 over
`repeats` batches of `iters` calls. A tiny shape is timed too, where the work is negligible and the
times are overhead alone.

--breakdown splits flashcore's fwd+bwd at issue #14's shape into its parts: the forward with grad
alone, the backward alone (autograd.grad on a kept graph, next to SDPA's), the floor any Python
autograd.Function sits on (one that allocates its outputs and calls nothing), and the time spent
inside the binding's backward and its two library calls (timers wrapped around them, so that row
runs a little slower than the plain one).

--latency times issue #14's forward as scripts/bench.sh --hopper's latency block does (bench/flashbench/
timing.py: CUDA events around each call after a 256 MB L2 flush, p50/p90 of 1000 calls, eager and
CUDA-graph replay) for flashcore and SDPA's cuDNN and flash backends, and says how much of each
eager sample is the host: the host's time per timed iteration (flush + events + call), the flush's
own GPU time, and the same samples with the GPU kept busy longer than any host gap (a spin kernel
after the flush), which are kernel time alone.

--diagnose prints what decides where the fwd+bwd time goes (diagnose_fwd_bwd's docstring).

    python python/benchmarks/bench_overhead.py [--device cuda|cpu] [--iters N] [--repeats N] [--json PATH]
        [--shapes main|all|none] [--sdpa auto,cudnn,...] [--breakdown] [--latency] [--diagnose]
"""

import argparse
import ctypes
import datetime
import gc
import json
import pathlib
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

import flashcore
from flashcore import _library as lib
from flashcore import _ops
from flashcore._tensors import pack

SHAPES = [(1, 8, 512, 64), (1, 1, 16, 64)]  # (batch, heads, seqlen, head_dim): issue #14's, and a tiny one
SDPA_BACKENDS = ["flash", "efficient", "cudnn", "math"]


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def time_per_call(fn, iters, repeats, device):
    """{host_p50, host_p90, wall_p50, wall_p90} in µs per call over `repeats` batches of `iters` calls."""
    for _ in range(max(3, iters // 10)):
        fn()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    host, wall = [], []
    for _ in range(repeats):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        host.append((time.perf_counter() - t0) / iters * 1e6)
        if device == "cuda":
            end.record()
            end.synchronize()
            wall.append(start.elapsed_time(end) * 1e3 / iters)
        else:
            wall.append(host[-1])
    return {"host_p50": statistics.median(host), "host_p90": percentile(host, 0.9),
            "wall_p50": statistics.median(wall), "wall_p90": percentile(wall, 0.9)}


def direct_c_calls(q, k, v, backward):
    """A closure calling flashcore_forward (and with `backward` flashcore_backward) with everything
    prepared once: descriptors, outputs, options, workspace."""
    out, lse = torch.empty_like(q), torch.empty(q.shape[0], q.shape[2], q.shape[1], device=q.device)
    stream = torch.cuda.current_stream().cuda_stream if q.is_cuda else None
    threads = 0 if q.is_cuda else torch.get_num_threads()
    options = lib.options(q.shape[-1] ** -0.5, stream=stream, num_threads=threads)
    fwd_buffer, fwd_views = pack(q, k, v, out, lse)
    forward, backward_call, check = lib.forward, lib.backward, lib.check
    if not backward:
        options_ref = ctypes.byref(options)

        def call():
            status = forward(*fwd_views, options_ref)
            if status:
                check(status)
        call.keep = (fwd_buffer, options)
        return call
    dout, dq, dk, dv = torch.randn_like(q), torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    bwd_buffer, bwd_views = pack(q, k, v, out, dout, lse, dq, dk, dv)
    needed = ctypes.c_size_t(0)
    check(lib.backward_workspace_size(*bwd_views, ctypes.byref(options), ctypes.byref(needed)))
    scratch = torch.empty(max(needed.value, 1), dtype=torch.uint8, device=q.device)
    if needed.value:
        options.workspace, options.workspace_bytes = scratch.data_ptr(), needed.value
    options_ref = ctypes.byref(options)

    def call():
        status = forward(*fwd_views, options_ref) or backward_call(*bwd_views, options_ref)
        if status:
            check(status)
    call.keep = (fwd_buffer, bwd_buffer, options, scratch, dout, dq, dk, dv)
    return call


def sdpa_layout(t):
    return t.transpose(1, 2)  # flash_attn's (B, S, H, D) to SDPA's (B, H, S, D), a view


def sdpa_rows(q, k, v, device, iters, repeats, backends=("auto",) + tuple(SDPA_BACKENDS)):
    """{(impl, pass): timings or the reason it did not run} for SDPA, auto and each backend."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    qs, ks, vs = (sdpa_layout(t) for t in (q, k, v))
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    dout = sdpa_layout(torch.randn_like(q))

    def forward():
        F.scaled_dot_product_attention(qs, ks, vs)

    def step():
        F.scaled_dot_product_attention(sdpa_layout(qg), sdpa_layout(kg), sdpa_layout(vg)).backward(dout)

    rows = {}
    for backend in [None if b == "auto" else b for b in backends]:
        name = "sdpa_auto" if backend is None else f"sdpa_{backend}"
        for pass_name, fn in (("fwd", forward), ("fwd+bwd", step)):
            try:
                if backend is None:
                    rows[name, pass_name] = time_per_call(fn, iters, repeats, device)
                else:
                    with sdpa_kernel(getattr(SDPBackend, {"flash": "FLASH_ATTENTION", "efficient":
                                                          "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION",
                                                          "math": "MATH"}[backend])):
                        rows[name, pass_name] = time_per_call(fn, iters, repeats, device)
            except (RuntimeError, AttributeError) as error:
                rows[name, pass_name] = str(error).strip().splitlines()[0][:200] if str(error) else repr(error)
    return rows


def bench_shape(shape, device, dtype, iters, repeats, sdpa_backends):
    batch, nheads, seqlen, headdim = shape
    q, k, v = (torch.randn(batch, seqlen, nheads, headdim, dtype=dtype, device=device) for _ in range(3))
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    dout = torch.randn_like(q)

    def flash_step():
        flashcore.flash_attn_func(qg, kg, vg).backward(dout)

    rows = {
        ("c_abi", "fwd"): time_per_call(direct_c_calls(q, k, v, False), iters, repeats, device),
        ("flashcore", "fwd"): time_per_call(lambda: flashcore.flash_attn_func(q, k, v), iters, repeats, device),
        ("c_abi", "fwd+bwd"): time_per_call(direct_c_calls(q, k, v, True), iters, repeats, device),
        ("flashcore", "fwd+bwd"): time_per_call(flash_step, iters, repeats, device),
    }
    rows.update(sdpa_rows(q, k, v, device, iters, repeats, sdpa_backends))
    return rows


def _sdpa_backend(name):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel(getattr(SDPBackend, {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
                                            "cudnn": "CUDNN_ATTENTION", "math": "MATH"}[name]))


class _FloorFunction(torch.autograd.Function):
    """What any Python autograd.Function costs: flashcore's five saved tensors and two outputs, its
    four allocations in each direction, no library call."""

    @staticmethod
    def forward(ctx, q, k, v, options):
        out = torch.empty_like(q)
        lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.mark_non_differentiable(lse)
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        q, k, v, out, lse = ctx.saved_tensors
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), None


class _Timers:
    """Wraps the binding's backward (_ops.run_backward_dense) and its library calls with timers, for
    the instrumented fwd+bwd row; restore() puts the originals back."""

    def __init__(self):
        self.totals = {"inside run_backward_dense": 0.0, "flashcore_backward_workspace_size": 0.0,
                       "flashcore_backward": 0.0, "flashcore_forward": 0.0}
        self.saved = (_ops.run_backward_dense, lib.backward, lib.backward_workspace_size, lib.forward)
        _ops.run_backward_dense = self._timed("inside run_backward_dense", _ops.run_backward_dense)
        lib.backward = self._timed("flashcore_backward", lib.backward)
        lib.backward_workspace_size = self._timed("flashcore_backward_workspace_size", lib.backward_workspace_size)
        lib.forward = self._timed("flashcore_forward", lib.forward)

    def _timed(self, key, fn):
        totals, clock = self.totals, time.perf_counter

        def timed(*args):
            t0 = clock()
            result = fn(*args)
            totals[key] += clock() - t0
            return result
        return timed

    def restore(self):
        _ops.run_backward_dense, lib.backward, lib.backward_workspace_size, lib.forward = self.saved


def breakdown_rows(shape, device, dtype, iters, repeats, sdpa_backends):
    """{name: timings} splitting flashcore's fwd+bwd (see the module docstring)."""
    batch, nheads, seqlen, headdim = shape
    q, k, v = (torch.randn(batch, seqlen, nheads, headdim, dtype=dtype, device=device) for _ in range(3))
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    dout = torch.randn_like(q)
    inputs = (qg, kg, vg)
    rows = {}
    rows["flashcore fwd (grad on)"] = time_per_call(lambda: flashcore.flash_attn_func(qg, kg, vg), iters, repeats,
                                                    device)
    kept = flashcore.flash_attn_func(qg, kg, vg)
    rows["flashcore bwd alone (autograd.grad)"] = time_per_call(
        lambda: torch.autograd.grad(kept, inputs, dout, retain_graph=True), iters, repeats, device)
    del kept
    rows["floor Function fwd+bwd"] = time_per_call(
        lambda: _FloorFunction.apply(qg, kg, vg, None)[0].backward(dout), iters, repeats, device)
    rows["floor Function bwd alone"] = time_per_call(
        lambda kept=_FloorFunction.apply(qg, kg, vg, None)[0]: torch.autograd.grad(kept, inputs, dout,
                                                                                 retain_graph=True),
        iters, repeats, device)
    qs, ks, vs = (sdpa_layout(t) for t in inputs)
    for backend in sdpa_backends:
        try:
            context = _sdpa_backend(backend) if backend != "auto" else None
            if context is not None:
                context.__enter__()
            try:
                kept = F.scaled_dot_product_attention(qs, ks, vs)
                rows[f"sdpa_{backend} bwd alone (autograd.grad)"] = time_per_call(
                    lambda: torch.autograd.grad(kept, inputs, sdpa_layout(dout), retain_graph=True), iters,
                    repeats, device)
                del kept
            finally:
                if context is not None:
                    context.__exit__(None, None, None)
        except (RuntimeError, AttributeError) as error:
            rows[f"sdpa_{backend} bwd alone (autograd.grad)"] = str(error).strip().splitlines()[0][:200]
    # Autograd runs a CUDA backward on its device thread, which a Python Function's backward must
    # enter the GIL on; with multithreading off it runs on this thread instead.
    step = lambda: flashcore.flash_attn_func(qg, kg, vg).backward(dout)
    sdpa_step = lambda: F.scaled_dot_product_attention(qs, ks, vs).backward(sdpa_layout(dout))
    with torch.autograd.set_multithreading_enabled(False):
        rows["flashcore fwd+bwd, autograd threads off"] = time_per_call(step, iters, repeats, device)
        rows["sdpa_auto fwd+bwd, autograd threads off"] = time_per_call(sdpa_step, iters, repeats, device)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        rows["flashcore fwd+bwd, gc off"] = time_per_call(step, iters, repeats, device)
    finally:
        if gc_was_enabled:
            gc.enable()
    timers = _Timers()
    try:
        calls = {"n": 0}

        def step():
            calls["n"] += 1
            flashcore.flash_attn_func(qg, kg, vg).backward(dout)
        rows["flashcore fwd+bwd, instrumented"] = time_per_call(step, iters, repeats, device)
    finally:
        timers.restore()
    for key, total in timers.totals.items():
        rows[f"  in it: {key}"] = {"host_p50": total / calls["n"] * 1e6}
    return rows


def diagnose_fwd_bwd(device, dtype, iters):
    """Prints what decides where flashcore's fwd+bwd time goes at issue #14's shape: flashcore and
    SDPA interleaved (so drift in the machine's state hits both), .backward() against
    autograd.grad (no gradient accumulation), garbage cycles left per call (gc off for the loop),
    the CUDA caching allocator's device allocations during the loop, and a cProfile of each step with
    autograd's device threads off (so the backward's Python is on this thread and in the profile)."""
    import collections
    import cProfile
    import pstats
    batch, nheads, seqlen, headdim = SHAPES[0]
    q, k, v = (torch.randn(batch, seqlen, nheads, headdim, dtype=dtype, device=device).requires_grad_()
               for _ in range(3))
    dout = torch.randn_like(q)
    inputs = (q, k, v)
    qs, ks, vs = (sdpa_layout(t) for t in inputs)
    steps = {
        "flashcore .backward": lambda: flashcore.flash_attn_func(q, k, v).backward(dout),
        "sdpa_auto .backward": lambda: F.scaled_dot_product_attention(qs, ks, vs).backward(sdpa_layout(dout)),
        "flashcore autograd.grad": lambda: torch.autograd.grad(flashcore.flash_attn_func(q, k, v), inputs, dout),
        "sdpa_auto autograd.grad": lambda: torch.autograd.grad(F.scaled_dot_product_attention(qs, ks, vs), inputs,
                                                               sdpa_layout(dout)),
    }
    rounds = collections.defaultdict(list)
    for _ in range(5):
        for name, fn in steps.items():
            rounds[name].append(time_per_call(fn, iters, 1, device)["host_p50"])
    print("\ndiagnose fwd+bwd: host us per call, 5 interleaved rounds of %d calls" % iters)
    for name, values in rounds.items():
        print(f"  {name:26s}" + "".join(f"{value:8.1f}" for value in values))
    for name in ("flashcore .backward", "sdpa_auto .backward"):
        fn = steps[name]
        fn()
        gc.collect()
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        sync()
        stats = torch.cuda.memory_stats() if device == "cuda" else {}
        allocs0 = stats.get("num_device_alloc", 0)
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for _ in range(200):
                fn()
            sync()
            stats = torch.cuda.memory_stats() if device == "cuda" else {}
            found = gc.collect()
            kinds = collections.Counter(type(o).__name__ for o in gc.garbage).most_common(6)
        finally:
            gc.garbage.clear()
            gc.set_debug(0)
            gc.enable()
        print(f"  {name}: 200 calls left {found} objects in garbage cycles {kinds}; cudaMalloc calls by the "
              f"caching allocator during them: {stats.get('num_device_alloc', 0) - allocs0}")
    with torch.autograd.set_multithreading_enabled(False):
        for name in ("flashcore .backward", "sdpa_auto .backward"):
            fn = steps[name]
            for _ in range(20):
                fn()
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(500):
                fn()
            profile.disable()
            print(f"\n  cProfile of {name}, 500 calls, autograd threads off (s):\n"
                  f"       ncalls  tottime  percall  cumtime  percall filename:lineno(function)")
            stream = __import__("io").StringIO()
            pstats.Stats(profile, stream=stream).sort_stats("tottime").print_stats(14)
            print("\n".join("    " + line for line in stream.getvalue().splitlines()[6:]))


def _bench_timing():
    """bench/flashbench/timing.py, the hopper benchmark's own timing code."""
    bench_dir = pathlib.Path(__file__).resolve().parents[2] / "bench"
    if str(bench_dir) not in sys.path:
        sys.path.insert(0, str(bench_dir))
    from flashbench import timing
    return timing


def latency_rows(dtype, runs, warmup):
    """Issue #14's latency block (scripts/bench.sh --hopper's method) with the host's share shown:
    {(impl, via): fields}. See the module docstring."""
    timing = _bench_timing()
    batch, nheads, seqlen, headdim = SHAPES[0]
    q, k, v = (torch.randn(batch, seqlen, nheads, headdim, dtype=dtype, device="cuda").requires_grad_()
               for _ in range(3))
    qs, ks, vs = (t.detach().transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v))  # --sdpa-layout bhsd
    flush = timing.L2Flusher(torch)
    # A spin longer than any host gap of a timed iteration (~0.2 ms at 1.98 GHz)
    spin_cycles = 400_000

    def flush_and_spin():
        flush()
        torch.cuda._sleep(spin_cycles)

    calls = {"flashcore": lambda: flashcore.flash_attn_func(q, k, v),
             "sdpa_cudnn": lambda: F.scaled_dot_product_attention(qs, ks, vs),
             "sdpa_flash": lambda: F.scaled_dot_product_attention(qs, ks, vs)}
    contexts = {"flashcore": None, "sdpa_cudnn": "cudnn", "sdpa_flash": "flash"}
    # The flush's own GPU time: the host must issue each timed iteration within it, or the gap
    # lands inside the next sample.
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    flush_ms = []
    for _ in range(20):
        start.record()
        flush()
        end.record()
        end.synchronize()
        flush_ms.append(start.elapsed_time(end))
    rows = {"flush": {"flush_gpu_us_p50": statistics.median(flush_ms) * 1e3}}
    for impl, fn in calls.items():
        context = _sdpa_backend(contexts[impl]) if contexts[impl] else None
        if context is not None:
            context.__enter__()
        try:
            def run():
                with torch.no_grad():
                    fn()
            samples = timing.samples_ms(torch, run, flush, fixed_reps=runs, fixed_warmup=warmup)
            hidden = timing.samples_ms(torch, run, flush_and_spin, fixed_reps=runs, fixed_warmup=warmup)
            wall = timing.wall_ms(torch, run, min(200, runs))
            host = _host_period_us(torch, run, flush, runs)
            rows[impl, "eager"] = {"p50_us": timing.percentile(samples, 50) * 1e3,
                                   "p90_us": timing.percentile(samples, 90) * 1e3,
                                   "hidden_p50_us": timing.percentile(hidden, 50) * 1e3,
                                   "hidden_p90_us": timing.percentile(hidden, 90) * 1e3,
                                   "wall_us": wall * 1e3,
                                   "host_iter_p50_us": timing.percentile(host, 50),
                                   "host_iter_p90_us": timing.percentile(host, 90)}
            replay, graph = timing.graph_replay(torch, run)
            samples = timing.samples_ms(torch, replay, flush, fixed_reps=runs, fixed_warmup=warmup)
            wall = timing.wall_ms(torch, replay, min(200, runs))
            rows[impl, "graph"] = {"p50_us": timing.percentile(samples, 50) * 1e3,
                                   "p90_us": timing.percentile(samples, 90) * 1e3, "wall_us": wall * 1e3}
            del replay, graph
        except (RuntimeError, AttributeError) as error:
            rows[impl, "eager"] = str(error).strip().splitlines()[0][:200]
        finally:
            if context is not None:
                context.__exit__(None, None, None)
    return rows


def _host_period_us(torch, fn, flush, runs):
    """The host's time per timed iteration of timing.samples_ms (flush, event, call, event), µs."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    periods = []
    torch.cuda.synchronize()
    for _ in range(runs):
        t0 = time.perf_counter()
        flush()
        start.record()
        fn()
        end.record()
        periods.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return periods


def json_row(impl, pass_name, shape, dtype, timing):
    batch, nheads, seqlen, headdim = shape
    flops = 4.0 * batch * nheads * seqlen * seqlen * headdim * (3.5 if pass_name == "fwd+bwd" else 1.0)
    row = {"impl": impl, "kernels": "auto", "pass": pass_name, "dtype": dtype, "head_dim": headdim, "causal": False,
           "batch": batch, "heads": nheads, "heads_kv": nheads, "seqlen_q": seqlen, "seqlen_k": seqlen}
    if isinstance(timing, str):
        return {**row, "ms": None, "tflops": None, "reason": timing}
    return {**row, "ms": timing["wall_p50"] / 1e3, "tflops": flops / (timing["wall_p50"] * 1e-6) / 1e12,
            "reason": "", **{f"{key}_us": value for key, value in timing.items()}}


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=pathlib.Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    parser.add_argument("--iters", type=int, default=None,
                        help="calls per timed batch at the main shape (default: 200 cuda, 20 cpu; the tiny shape "
                             "takes 5x as many)")
    parser.add_argument("--repeats", type=int, default=11, help="timed batches; p50/p90 are over these")
    parser.add_argument("--json", type=pathlib.Path, default=None, help="also write the rows as JSON here")
    parser.add_argument("--shapes", choices=["all", "main", "none"], default="all",
                        help="main: issue #14's B1 H8 S512 D64 only (not the tiny shape); none: no table")
    parser.add_argument("--sdpa", default="auto," + ",".join(SDPA_BACKENDS),
                        help="SDPA rows: a comma-separated subset of auto,flash,efficient,cudnn,math")
    parser.add_argument("--breakdown", action="store_true", help="split flashcore's fwd+bwd (module docstring)")
    parser.add_argument("--latency", action="store_true",
                        help="issue #14's latency block with the host's share (module docstring; CUDA only)")
    parser.add_argument("--diagnose", action="store_true",
                        help="where flashcore's fwd+bwd time goes: interleaved rounds, cycles, allocations, cProfile")
    parser.add_argument("--latency-runs", type=int, default=1000)
    parser.add_argument("--latency-warmup", type=int, default=50)
    args = parser.parse_args()
    sdpa_backends = tuple(b for b in args.sdpa.split(",") if b)
    dtype = getattr(torch, args.dtype)
    iters = args.iters or (200 if args.device == "cuda" else 20)

    device_name = torch.cuda.get_device_name() if args.device == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    print(f"flashcore {flashcore.__version__} ({lib.LIBRARY_PATH}), torch {torch.__version__}, device {args.device} "
          f"({device_name}), commit {git_commit()}")
    json_rows = []
    if args.diagnose:
        diagnose_fwd_bwd(args.device, dtype, iters)
    shapes = [(SHAPES[0], iters)] + ([(SHAPES[1], 5 * iters)] if args.shapes == "all" else [])
    shapes = [] if args.shapes == "none" else shapes
    for shape, shape_iters in shapes:
        rows = bench_shape(shape, args.device, dtype, shape_iters, args.repeats, sdpa_backends)
        batch, nheads, seqlen, headdim = shape
        print(f"\nB={batch} H={nheads} S={seqlen} D={headdim} {args.dtype}, p50 and p90 over {args.repeats} "
              f"batches of {shape_iters} calls, us per call")
        for pass_name in ("fwd", "fwd+bwd"):
            print(f"  {pass_name:8s}{'':14s}{'host p50':>10s}{'host p90':>10s}{'wall p50':>10s}{'wall p90':>10s}")
            for (impl, row_pass), timing in rows.items():
                if row_pass != pass_name:
                    continue
                json_rows.append(json_row(impl, pass_name, shape, args.dtype, timing))
                if isinstance(timing, str):
                    print(f"  {impl:22s}  not run: {timing[:90]}")
                else:
                    print(f"  {impl:22s}{timing['host_p50']:10.1f}{timing['host_p90']:10.1f}"
                          f"{timing['wall_p50']:10.1f}{timing['wall_p90']:10.1f}")
            overhead = rows["flashcore", pass_name]["host_p50"] - rows["c_abi", pass_name]["host_p50"]
            print(f"  binding overhead (flashcore - c_abi, host p50): {overhead:.1f} us")
    if args.breakdown:
        rows = breakdown_rows(SHAPES[0], args.device, dtype, iters, args.repeats, sdpa_backends)
        print(f"\nfwd+bwd broken down, B={SHAPES[0][0]} H={SHAPES[0][1]} S={SHAPES[0][2]} D={SHAPES[0][3]} {args.dtype}, us per call")
        print(f"  {'':44s}{'host p50':>10s}{'host p90':>10s}{'wall p50':>10s}{'wall p90':>10s}")
        for name, timing in rows.items():
            if isinstance(timing, str):
                print(f"  {name:44s}  not run: {timing[:90]}")
                continue
            values = [timing.get(key) for key in ("host_p50", "host_p90", "wall_p50", "wall_p90")]
            print(f"  {name:44s}" + "".join(f"{v:10.1f}" if v is not None else f"{'':10s}" for v in values))
            json_rows.append({"impl": name, "pass": "breakdown", "dtype": args.dtype, "head_dim": SHAPES[0][3],
                              **{f"{key}_us": value for key, value in timing.items()}})
    if args.latency and args.device == "cuda":
        rows = latency_rows(dtype, args.latency_runs, args.latency_warmup)
        print(f"\nlatency, B=1 H=8 S=512 D=64 {args.dtype} forward, the hopper benchmark's method (GPU time per "
              f"call after an L2 flush, {args.latency_runs} runs), us; flush alone on the GPU: "
              f"{rows.pop('flush')['flush_gpu_us_p50']:.1f}")
        print("  hidden: the same with a spin kernel after the flush (no host gap can reach the sample); host iter: "
              "the host's time per timed iteration")
        print(f"  {'impl':12s}{'via':7s}{'p50':>8s}{'p90':>8s}{'hidden p50':>12s}{'hidden p90':>12s}{'wall':>8s}"
              f"{'host iter p50':>15s}{'p90':>8s}")
        for (impl, via), fields in rows.items():
            if isinstance(fields, str):
                print(f"  {impl:12s}{via:7s}  not run: {fields[:90]}")
                continue
            get = lambda key, width: f"{fields[key]:{width}.1f}" if key in fields else " " * width
            print(f"  {impl:12s}{via:7s}{get('p50_us', 8)}{get('p90_us', 8)}{get('hidden_p50_us', 12)}"
                  f"{get('hidden_p90_us', 12)}{get('wall_us', 8)}{get('host_iter_p50_us', 15)}{get('host_iter_p90_us', 8)}")
            batch, nheads, seqlen, headdim = SHAPES[0]
            json_rows.append({"impl": impl, "kernels": "auto", "pass": "fwd", "via": via, "suite": "latency",
                              "dtype": args.dtype, "head_dim": headdim, "causal": False, "batch": batch,
                              "heads": nheads, "heads_kv": nheads, "seqlen_q": seqlen, "seqlen_k": seqlen,
                              "ms": fields["p50_us"] / 1e3, "ms_p90": fields["p90_us"] / 1e3,
                              "tflops": 4.0 * batch * nheads * seqlen * seqlen * headdim / (fields["p50_us"] * 1e-6) / 1e12,
                              "reason": "", **fields})
    if args.json is not None:
        context = {"benchmark": "python/benchmarks/bench_overhead.py", "device": device_name,
                   "torch": torch.__version__, "flashcore": flashcore.__version__, "library": str(lib.LIBRARY_PATH),
                   "commit": git_commit(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                   "iters": iters, "repeats": args.repeats}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"context": context, "rows": json_rows}, indent=1) + "\n")
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
