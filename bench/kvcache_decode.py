#!/usr/bin/env python3
"""Decode benchmark for flash_attn_with_kvcache (issue 19): KV bytes read per second against the
measured device-copy bandwidth and against SDPA's fastest backend, on one GPU in one run.

Shape: seqlen_q = 1, bf16, head_dim 128, GQA 32:8, cache_seqlens = seqlen_k for every sequence,
batch 1 / 8 / 64 (--batches), contiguous cache vs paged with page size 16 (--pages).

Method:
  - Every call is timed as a CUDA-graph replay (captured `--calls` back-to-back calls, CUDA events
    around the replay, median of `--reps` replays), so Python's per-call overhead does not hide the
    GPU time; flashcore runs with check_indices=False (no host copy of the indices: nothing to
    synchronise on inside a graph). `ms_eager` times the same calls eagerly (CUDA events around
    `--calls` back-to-back calls, median of `--reps`): host overhead included, for flashcore and
    SDPA alike.
  - The caches are rotated over enough independent copies that one replay reads more than 4x the
    L2 (50 MB on H100): the bytes come from HBM, not L2.
  - KV bytes = 2 (K and V) x batch x seqlen_k x heads_kv x head_dim x 2 bytes; the copy bandwidth is
    the fastest of three copies of a 2 GiB buffer (cudaMemcpyAsync, a plain Triton copy kernel,
    torch's elementwise kernel; copy_bandwidth says how), counting bytes read and written, timed the
    same way, measured before and after the rows.
  - SDPA gets its preferred layout, (batch, heads_kv, seqlen_k, head_dim) contiguous, enable_gqa=True;
    each backend that accepts the call is timed and the fastest kept (it has no paged cache: the
    paged rows compare with its contiguous time).
"""

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys

import torch
import torch.nn.attention

L2_BYTES = 50 * 1024 * 1024


def time_eager(fn_of_copy, copies, calls, reps):
    """Median ms per call of `calls` back-to-back eager calls (the fallback when capture fails)."""
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(calls):
            fn_of_copy(i % copies)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def time_call(fn_of_copy, copies, calls, reps):
    """(ms, how): CUDA-graph replay timing, or eager timing with the capture's error."""
    try:
        return time_graph(fn_of_copy, copies, calls, reps), "graph"
    except Exception as e:  # noqa: BLE001 - recorded in the row
        torch.cuda.synchronize()
        return time_eager(fn_of_copy, copies, calls, reps), f"eager (capture failed: {type(e).__name__}: {e})"[:300]


def time_graph(fn_of_copy, copies, calls, reps):
    """Median ms per call of fn_of_copy(i % copies) captured `calls` times in one CUDA graph. The
    capture runs on the stream the warm-up ran on (as a serving loop warms up on its capture stream):
    flashcore keeps its split workspace per stream (src/cuda/decode_workspace.h)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(copies):  # warm-up outside the capture (allocator, attribute calls)
            fn_of_copy(i)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream, capture_error_mode="relaxed"):
        for i in range(calls):
            fn_of_copy(i % copies)
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def profile_kernels(fn_of_copy, copies, calls=20):
    """The GPU kernels of `calls` eager calls under torch.profiler: [{name, per_call, avg_us}], so a
    row's time splits into its kernels (the decode kernel, the combine, cuDNN's own); launch gaps are
    the rest of the graph-replay time."""
    from torch.profiler import ProfilerActivity, profile
    for i in range(copies):
        fn_of_copy(i)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            fn_of_copy(i % copies)
        torch.cuda.synchronize()
    kernels = []
    for e in prof.key_averages():
        total = getattr(e, "self_device_time_total", None)
        if total is None:
            total = getattr(e, "self_cuda_time_total", 0)
        if total and e.count:
            kernels.append(dict(name=e.key[:120], per_call=e.count / calls, avg_us=total / e.count))
    return sorted(kernels, key=lambda k: -k["avg_us"] * k["per_call"])


def copy_bandwidth(reps):
    """The device-copy bandwidth the decode rows are judged against: bytes read + written per second
    of three copies of a 2 GiB buffer, each after a warm-up that brings the clocks up (v1 measured the
    first copies at idle clocks), the highest kept as the reference:
      - memcpy: torch's copy_ of a contiguous same-dtype tensor, which is cudaMemcpyAsync device to device;
      - triton_copy: a plain copy kernel (16-byte loads and stores, 4096 elements a program), when
        Triton imports;
      - elementwise: torch.neg into a second buffer (torch's vectorised elementwise kernel).
    Also, for the record only, `read_only`: a sum over the buffer (bytes read per second), since a
    decode step only reads. Returns (reference bytes/s, {name: bytes/s})."""
    n = 2 * 1024 ** 3 // 4
    a = torch.empty(n, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a)
    a.fill_(1.0)
    copies = {"memcpy": lambda i: b.copy_(a), "elementwise": lambda i: torch.neg(a, out=b)}
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def _copy(src, dst, count, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(dst + offs, tl.load(src + offs, mask=offs < count), mask=offs < count)

        grid = (triton.cdiv(n, 4096),)
        copies["triton_copy"] = lambda i: _copy[grid](a, b, n, BLOCK=4096, num_warps=8)
    except Exception as e:  # noqa: BLE001 - no Triton: the other two stand
        print(f"triton copy kernel skipped: {type(e).__name__}: {e}", flush=True)
    results = {}
    for name, fn in copies.items():
        try:
            for _ in range(20):
                fn(0)
            torch.cuda.synchronize()
            ms = time_graph(fn, 1, 10, reps)
            results[name] = 2 * a.numel() * 4 / (ms * 1e-3)
        except Exception as e:  # noqa: BLE001
            print(f"copy {name} failed: {type(e).__name__}: {e}", flush=True)
    out = torch.empty((), dtype=torch.float32, device="cuda")
    for _ in range(5):
        torch.sum(a, dim=0, out=out)
    torch.cuda.synchronize()
    ms = time_graph(lambda i: torch.sum(a, dim=0, out=out), 1, 10, reps)
    read_only = a.numel() * 4 / (ms * 1e-3)
    del a, b
    torch.cuda.empty_cache()
    return max(results.values()), dict(results, read_only=read_only)


def read_floor(nbytes, calls, reps):
    """What one launch can read of `nbytes` (batch 1's K/V: 33.5 MB) from HBM, timed like the decode
    rows (CUDA-graph replay of `calls` launches over buffers rotated past 4x the L2, median of `reps`):
      - triton_read_*: a streaming-read kernel (each program sums BLOCK float32s with 16-byte loads and
        writes one float; configurations by BLOCK and warps, the fastest kept);
      - torch_sum: torch's reduction over the buffer;
      - memcpy: cudaMemcpyAsync device to device of the whole buffer (reads nbytes, writes nbytes).
    Returns {name: {"us": .., "read_tbps": bytes read / time}}: whether issue 19's 80 % of the
    large-copy bandwidth is reachable at all by one launch of that size."""
    n = nbytes // 4
    copies = max(2, math.ceil(4 * L2_BYTES / nbytes))
    bufs = [torch.randn(n, device="cuda") for _ in range(copies)]
    results = {}

    def record(name, fn, bytes_read):
        try:
            ms = time_graph(fn, copies, calls, reps)
            results[name] = dict(us=ms * 1e3, read_tbps=bytes_read / (ms * 1e-3) / 1e12)
        except Exception as e:  # noqa: BLE001 - recorded
            results[name] = dict(us=None, reason=f"{type(e).__name__}: {e}"[:200])

    try:
        import triton
        import triton.language as tl

        @triton.jit
        def _read(src, out, count, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(src + offs, mask=offs < count, other=0.0, cache_modifier=".cg")
            tl.store(out + tl.program_id(0), tl.sum(x, axis=0))

        for block, warps in ((4096, 4), (8192, 8), (16384, 8)):
            grid = (triton.cdiv(n, block),)
            out = torch.empty(grid[0], device="cuda")
            record(f"triton_read_b{block}_w{warps}",
                   lambda i, grid=grid, out=out, block=block, warps=warps: _read[grid](bufs[i], out, n, BLOCK=block,
                                                                                     num_warps=warps), nbytes)
    except Exception as e:  # noqa: BLE001 - no Triton: torch's two stand
        results["triton_read"] = dict(us=None, reason=f"{type(e).__name__}: {e}"[:200])
    total = torch.empty((), device="cuda")
    record("torch_sum", lambda i: torch.sum(bufs[i], dim=0, out=total), nbytes)
    dst = torch.empty_like(bufs[0])
    record("memcpy", lambda i: dst.copy_(bufs[i]), nbytes)
    del bufs, dst
    torch.cuda.empty_cache()
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", default="1,8,64")
    parser.add_argument("--pages", default="0,16", help="0 = contiguous cache")
    parser.add_argument("--seqlen-k", type=int, default=8192)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--heads-kv", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--append", action="store_true", help="also time the call with one new token appended")
    parser.add_argument("--out", default="bench/results/kvcache_decode.json")
    parser.add_argument("--skip-sdpa", action="store_true")
    parser.add_argument("--label", default="", help="suffix of the flashcore rows' impl name")
    parser.add_argument("--profile-batches", default="",
                        help="BATCH,..: also list the kernels (torch.profiler, eager) of these batches' default rows")
    parser.add_argument("--split-sweep", default="",
                        help="BATCH:S1/S2/..,BATCH:..: also time the contiguous cache with these forced num_splits")
    parser.add_argument("--sdpa-backends", default="flash,cudnn,efficient",
                        help="SDPA backends to time (of flash, cudnn, efficient, math; math is never the fastest "
                             "and costs ~17 s at batch 64)")
    parser.add_argument("--floor", action="store_true",
                        help="also time a streaming read and a device-to-device memcpy of each batch's K/V bytes "
                             "(read_floor: what one launch of that size can read)")
    parser.add_argument("--ab", default="",
                        help="V1,V2,..: also time the contiguous and paged rows of --ab-batches with "
                             "FLASHCORE_DECODE_AB=V (builds with FLASHCORE_DECODE_AB_VARIANTS; graph replay only; "
                             "on sm90, with dev/sm90_decode/ab_variants.patch applied, 'sm80' keeps every call off "
                             "the cluster kernel, 'cluster' puts every call on it, and 'cluster4w' / 'cluster6w' / "
                             "'cluster12w' run the other cluster CTAs)")
    parser.add_argument("--ab-batches", default="1,8")
    args = parser.parse_args()

    import flashcore

    torch.manual_seed(0)
    dev = torch.cuda.get_device_properties(0)
    copy_bps, copy_all = copy_bandwidth(args.reps)
    print(f"{dev.name}: device copy {copy_bps / 1e12:.3f} TB/s (2 GiB, read + write; "
          + ", ".join(f"{k} {v / 1e12:.3f}" for k, v in copy_all.items()) + ")", flush=True)
    H, HKV, D, SK = args.heads, args.heads_kv, args.head_dim, args.seqlen_k
    rows = []
    backends = {
        "sdpa_flash": torch.nn.attention.SDPBackend.FLASH_ATTENTION,
        "sdpa_cudnn": torch.nn.attention.SDPBackend.CUDNN_ATTENTION,
        "sdpa_efficient": torch.nn.attention.SDPBackend.EFFICIENT_ATTENTION,
        "sdpa_math": torch.nn.attention.SDPBackend.MATH,
    }
    backends = {k: v for k, v in backends.items() if k.removeprefix("sdpa_") in args.sdpa_backends.split(",")}
    profile_batches = {int(b) for b in args.profile_batches.split(",") if b}
    ab_variants = [v for v in args.ab.split(",") if v]
    ab_batches = {int(b) for b in args.ab_batches.split(",") if b}
    floors = {}
    for batch in [int(b) for b in args.batches.split(",")]:
        kv_bytes = 2 * batch * SK * HKV * D * 2
        copies = max(1, math.ceil(4 * L2_BYTES / kv_bytes))
        if args.floor:
            floors[batch] = read_floor(kv_bytes, args.calls, args.reps)
            print(f"batch {batch}: read floor of {kv_bytes / 1e6:.1f} MB:",
                  {k: (round(v["us"], 2), round(v["read_tbps"], 3), round(v["read_tbps"] * 1e12 / copy_bps, 3))
                   for k, v in floors[batch].items() if v.get("us")}, "(us, TB/s read, of copy)", flush=True)
        q = torch.randn(batch, 1, H, D, dtype=torch.bfloat16, device="cuda")
        seqlens = torch.full((batch,), SK, dtype=torch.int32, device="cuda")
        base = dict(pass_="decode", dtype="bf16", head_dim=D, causal=False, batch=batch, heads=H, heads_kv=HKV,
                    seqlen_q=1, seqlen_k=SK, kv_bytes=kv_bytes, l2_rotation_copies=copies)
        # SDPA, contiguous (batch, heads_kv, seqlen, head_dim).
        ks = [torch.randn(batch, HKV, SK, D, dtype=torch.bfloat16, device="cuda") for _ in range(copies)]
        vs = [torch.randn_like(ks[0]) for _ in range(copies)]
        qs = q.transpose(1, 2).contiguous()
        sdpa_best = None
        for name, backend in ({} if args.skip_sdpa else backends).items():
            row = dict(base, impl=name, kernels=None, page_size=0)
            try:
                def call(i, backend=backend):
                    with torch.nn.attention.sdpa_kernel([backend]):
                        return torch.nn.functional.scaled_dot_product_attention(qs, ks[i], vs[i], enable_gqa=True)
                ms, how = time_call(call, copies, args.calls, args.reps)
                row.update(ms=ms, timing=how, ms_eager=time_eager(call, copies, args.calls, args.reps), reason=None)
                if sdpa_best is None or ms < sdpa_best[1]:
                    sdpa_best = (name, ms)
                if batch in profile_batches and name != "sdpa_math":
                    row["kernels_profile"] = profile_kernels(call, copies)
            except Exception as e:  # a backend that refuses the shape: recorded with its reason
                row.update(ms=None, reason=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
            rows.append(row)
        del ks, vs
        torch.cuda.empty_cache()
        for page in [int(p) for p in args.pages.split(",")]:
            if page == 0:
                kcs = [torch.randn(batch, SK, HKV, D, dtype=torch.bfloat16, device="cuda") for _ in range(copies)]
                tables = [None] * copies
            else:
                pages_per_seq = SK // page
                kcs = [torch.randn(batch * pages_per_seq, page, HKV, D, dtype=torch.bfloat16, device="cuda")
                       for _ in range(copies)]
                tables = [torch.randperm(batch * pages_per_seq, device="cuda").int().view(batch, pages_per_seq)
                          for _ in range(copies)]
            vcs = [torch.randn_like(kcs[0]) for _ in range(copies)]
            sweep = {}
            for item in filter(None, args.split_sweep.split(",")):
                sweep_batch, counts = item.split(":")
                sweep[int(sweep_batch)] = [int(c) for c in counts.split("/")]
            variants = [(append, 0, "") for append in ([False, True] if args.append else [False])]
            if page == 0:
                variants += [(False, splits, "") for splits in sweep.get(batch, [])]
            if batch in ab_batches:
                variants += [(False, 0, ab) for ab in ab_variants]
                if page == 0:  # the split sweep for each A/B variant too
                    variants += [(False, splits, ab) for ab in ab_variants for splits in sweep.get(batch, [])]
            for append, forced_splits, ab in variants:
                if ab:
                    os.environ["FLASHCORE_DECODE_AB"] = ab
                else:
                    os.environ.pop("FLASHCORE_DECODE_AB", None)
                k_new = torch.randn(batch, 1, HKV, D, dtype=torch.bfloat16, device="cuda") if append else None
                lens = seqlens - 1 if append else seqlens

                def call(i):
                    return flashcore.flash_attn_with_kvcache(q, kcs[i], vcs[i], k_new, k_new, cache_seqlens=lens,
                                                             block_table=tables[i], num_splits=forced_splits,
                                                             check_indices=False)
                row = dict(base, impl="flashcore" + args.label + (f"_ab_{ab}" if ab else ""),
                           kernels=os.environ.get("FLASHCORE_KERNELS") or "auto",
                           decode_cluster=os.environ.get("FLASHCORE_DECODE_CLUSTER") or "auto",
                           page_size=page, append=append, ab_variant=ab or None,
                           num_splits=forced_splits or "auto",
                           decode_kernel=os.environ.get("FLASHCORE_DECODE_KERNEL") or "mma",
                           decode_stages=os.environ.get("FLASHCORE_DECODE_STAGES") or "auto",
                           page_ids=(os.environ.get("FLASHCORE_DECODE_PAGE_IDS") or "by-lane") if page else None,
                           workspace=os.environ.get("FLASHCORE_DECODE_WORKSPACE") or "cached",
                           combine=os.environ.get("FLASHCORE_DECODE_COMBINE") or "fused")
                try:
                    ms, how = time_call(call, copies, args.calls, args.reps)
                    bps = kv_bytes / (ms * 1e-3)
                    row.update(ms=ms, timing=how,
                               ms_eager=None if ab else time_eager(call, copies, args.calls, args.reps),
                               kv_tbps=bps / 1e12, frac_of_copy=bps / copy_bps,
                               frac_of_read_only=bps / copy_all["read_only"], reason=None)
                    if sdpa_best is not None:
                        row.update(sdpa_best=sdpa_best[0], speedup_vs_sdpa_best=sdpa_best[1] / ms)
                        eager_best = min(r["ms_eager"] for r in rows if r["batch"] == batch
                                         and r["impl"].startswith("sdpa") and r.get("ms_eager"))
                        if row["ms_eager"]:
                            row["speedup_vs_sdpa_best_eager"] = eager_best / row["ms_eager"]
                        row["speedup_vs_sdpa"] = {r["impl"]: r["ms"] / ms for r in rows
                                                  if r["batch"] == batch and r["impl"].startswith("sdpa") and r.get("ms")}
                    # Correctness spot check against SDPA (float32 math) on copy 0.
                    out = call(0)
                    if page == 0:
                        kk, vv = kcs[0], vcs[0]
                    else:
                        kk = kcs[0][tables[0].long()].reshape(batch, SK, HKV, D)
                        vv = vcs[0][tables[0].long()].reshape(batch, SK, HKV, D)
                    ref = torch.nn.functional.scaled_dot_product_attention(
                        q.transpose(1, 2).float(), kk.transpose(1, 2).float(), vv.transpose(1, 2).float(),
                        enable_gqa=True).transpose(1, 2)
                    row["max_abs_diff_vs_fp32"] = (out.float() - ref).abs().max().item() if not append else None
                    if batch in profile_batches and not append and not forced_splits and not ab:
                        row["kernels_profile"] = profile_kernels(call, copies)
                        print("  kernels:", [(k["name"][:50], round(k["per_call"], 2), round(k["avg_us"], 2))
                                             for k in row["kernels_profile"]], flush=True)
                except Exception as e:
                    row.update(ms=None, reason=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
                rows.append(row)
                print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()
                       if k in ("impl", "batch", "page_size", "append", "ms", "kv_tbps", "frac_of_copy",
                                "speedup_vs_sdpa_best", "ms_eager", "speedup_vs_sdpa_best_eager",
                                "max_abs_diff_vs_fp32", "num_splits", "reason")}, flush=True)
            os.environ.pop("FLASHCORE_DECODE_AB", None)
            del kcs, vcs
            torch.cuda.empty_cache()
        for r in rows:
            if r["batch"] == batch and r["impl"].startswith("sdpa") and r.get("ms"):
                r["kv_tbps"] = kv_bytes / (r["ms"] * 1e-3) / 1e12
                r["frac_of_copy"] = kv_bytes / (r["ms"] * 1e-3) / copy_bps
                print({k: r[k] for k in ("impl", "batch", "ms", "ms_eager", "kv_tbps", "frac_of_copy")}, flush=True)
    copy_end_bps, copy_end_all = copy_bandwidth(args.reps)
    print(f"device copy at the end: {copy_end_bps / 1e12:.3f} TB/s", flush=True)
    for r in rows:
        r["pass"] = r.pop("pass_")
        r["tflops"] = None if not r.get("ms") else 4 * r["batch"] * r["heads"] * r["seqlen_k"] * r["head_dim"] / (
            r["ms"] * 1e-3) / 1e12
    commit = os.environ.get("COMMIT") or "unknown"
    result = dict(
        schema="flashcore-kvcache-decode-1",
        context=dict(gpu=dev.name, sm_count=dev.multi_processor_count, torch=torch.__version__,
                     cuda=torch.version.cuda, python=platform.python_version(), commit=commit,
                     date=datetime.datetime.now(datetime.timezone.utc).isoformat(),
                     copy_bandwidth_tbps=copy_bps / 1e12,
                     copy_bandwidths_tbps={k: v / 1e12 for k, v in copy_all.items()},
                     copy_bandwidth_end_tbps=copy_end_bps / 1e12,
                     copy_bandwidths_end_tbps={k: v / 1e12 for k, v in copy_end_all.items()},
                     env={k: v for k, v in os.environ.items() if k.startswith("FLASHCORE_")},
                     read_floor={str(b): f for b, f in floors.items()}),
        method=__doc__, settings=vars(args), rows=rows)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print("wrote", args.out)


if __name__ == "__main__":
    sys.exit(main())
