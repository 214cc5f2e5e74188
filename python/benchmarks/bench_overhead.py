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
binding overhead = flashcore - c_abi. On CUDA, "host" is the time to issue a call (what the Python
thread spends; the overhead lives there) and "wall" the steady-state time per call including the
GPU work (CUDA events around each batch of calls). Each figure is the median (p50) and p90 over
`repeats` batches of `iters` calls. A tiny shape is timed too, where the work is negligible and the
times are overhead alone.

    python python/benchmarks/bench_overhead.py [--device cuda|cpu] [--iters N] [--repeats N] [--json PATH]
"""

import argparse
import ctypes
import datetime
import json
import pathlib
import statistics
import subprocess
import time

import torch
import torch.nn.functional as F

import flashcore
from flashcore import _library as lib
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


def sdpa_rows(q, k, v, device, iters, repeats):
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
    for backend in [None] + SDPA_BACKENDS:
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


def bench_shape(shape, device, dtype, iters, repeats):
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
    rows.update(sdpa_rows(q, k, v, device, iters, repeats))
    return rows


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
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    iters = args.iters or (200 if args.device == "cuda" else 20)

    device_name = torch.cuda.get_device_name() if args.device == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    print(f"flashcore {flashcore.__version__} ({lib.LIBRARY_PATH}), torch {torch.__version__}, device {args.device} "
          f"({device_name}), commit {git_commit()}")
    json_rows = []
    for shape, shape_iters in [(SHAPES[0], iters), (SHAPES[1], 5 * iters)]:
        rows = bench_shape(shape, args.device, dtype, shape_iters, args.repeats)
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
