"""GPU timing with CUDA events: warm-up, an L2 flush before every timed call, per-call samples.

Like triton.testing.do_bench: each timed call is preceded by writing a 256 MB buffer (H100's L2 is
50 MB), so every call starts with a cold L2 and, because the flush keeps the GPU busy while Python
enqueues the next call, the launch overhead of the Python wrapper is hidden for small calls. The
latency table adds a GPU hold after the flush (GpuHold) so that stays true under host jitter.
"""
import gc
import math
import statistics
import time


class L2Flusher:
    def __init__(self, torch, megabytes=256):
        self.buffer = torch.empty(megabytes * 2**20 // 4, dtype=torch.int32, device="cuda")

    def __call__(self):
        self.buffer.zero_()


class GpuHold:
    """A GPU sleep of about `microseconds` enqueued after the flush in the latency table (the same
    for every impl): the flush alone (~89 us on the H100) hides the host's work for one timed
    iteration (the flush's and hold's launches, two event records, the call's host path) only while
    the host issues it within the flush's GPU time; a host stall past that left the GPU idle between
    the start event and the call's first kernel, and the idle landed in the sample (session 11's
    eager p90: 14.0 us in one run, 10.6 in another, for the same kernel). With the hold the sample
    is the call's GPU time for any host stall shorter than flush + hold. The host's time per call is
    reported beside it (wall_ms)."""

    def __init__(self, torch, microseconds=200.0):
        self.torch = torch
        self.microseconds = microseconds
        # _sleep counts SM clock cycles; the clock moves with the power state, so calibrate once
        # here (the hold needs only to be long enough, not exact).
        probe = 200_000
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(probe)
        start.record()
        torch.cuda._sleep(probe)
        end.record()
        end.synchronize()
        cycles_per_us = probe / max(start.elapsed_time(end) * 1e3, 1.0)
        self.cycles = int(microseconds * cycles_per_us)

    def __call__(self):
        self.torch.cuda._sleep(self.cycles)


def samples_ms(torch, fn, flush, warmup_ms=10.0, rep_ms=40.0, min_reps=5, max_reps=100, fixed_reps=None,
               fixed_warmup=None):
    """Per-call times (ms) of `fn`. The first call is untimed (lazy init, cuDNN plan building); one
    more call estimates the time, which sets the warm-up and rep counts from warmup_ms / rep_ms
    (at least min_reps, at most max_reps; 3 for a call longer than rep_ms) unless fixed_* are given."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    flush()
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end), 1e-3)
    warmup = fixed_warmup if fixed_warmup is not None else min(100, max(1, math.ceil(warmup_ms / estimate)))
    reps = fixed_reps if fixed_reps is not None else min(max_reps, max(min_reps, math.ceil(rep_ms / estimate)))
    if fixed_reps is None and estimate > rep_ms:
        # A call longer than the whole rep budget (a slow kernel): three samples keep the sweep's
        # time bounded and still give a median.
        reps = 3
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    gc_was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for i in range(reps):
            flush()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
    finally:
        if gc_was_enabled:
            gc.enable()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def median(values):
    return statistics.median(values)


def percentile(values, q):
    """Nearest-rank percentile, q in [0, 100]."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def graph_replay(torch, fn, warmup=3):
    """(replay callable, graph): `fn` captured once in a CUDA graph after a few warm-up calls on a side
    stream (as PyTorch's CUDA-graph notes ask). Keep the graph alive while replaying it."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph.replay, graph


def wall_ms(torch, fn, calls=200):
    """Host wall time per call of `calls` back-to-back calls (no flush), synchronised at both ends:
    what a caller issuing small calls in a loop sees, launch overhead included."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3 / calls
