"""Per-call overhead of flashcore's PyTorch binding, next to SDPA's.

For each shape it times, per call:
  c_abi      the library called directly through ctypes with prebuilt descriptors and preallocated
             outputs: the work itself plus one C call, the floor any binding sits on;
  flashcore  flashcore.flash_attn_func (argument checks, output allocation, custom-op dispatch);
  sdpa       torch.nn.functional.scaled_dot_product_attention on the same tensors;
and, with --backward, forward+backward through autograd for flashcore and SDPA.
binding overhead = flashcore - c_abi. On CUDA, "host" is the time to issue a call (what the Python
thread spends; the overhead lives there) and "wall" the steady-state time per call including the
GPU work (CUDA events, synchronised once per batch of calls). A tiny shape is timed too, where the
work is negligible and the times are overhead alone.

    python python/benchmarks/bench_overhead.py [--device cuda|cpu] [--iters N] [--backward]
"""

import argparse
import ctypes
import statistics
import time

import torch
import torch.nn.functional as F

import flashcore
from flashcore import _library as lib
from flashcore._tensors import pack


def time_per_call(fn, iters, repeats, device):
    """(host µs, wall µs) per call: the median over `repeats` batches of `iters` calls."""
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
    return statistics.median(host), statistics.median(wall)


def direct_c_call(q, k, v):
    """A closure calling flashcore_forward with everything prepared once (the descriptor buffer
    keeps the tensors alive)."""
    out, lse = torch.empty_like(q), torch.empty(q.shape[0], q.shape[2], q.shape[1], device=q.device)
    descriptors, views = pack(q, k, v, out, lse)
    scale = q.shape[-1] ** -0.5
    stream = torch.cuda.current_stream().cuda_stream if q.is_cuda else None
    threads = 0 if q.is_cuda else torch.get_num_threads()
    forward = lib.forward
    options = ctypes.byref(lib.options(scale, stream=stream, num_threads=threads))

    def call():
        status = forward(*views, options)
        if status:
            lib.check(status)
    call.descriptors = descriptors
    return call


def sdpa_layout(t):
    return t.transpose(1, 2)  # flash_attn's (B, S, H, D) to SDPA's (B, H, S, D), a view


def bench_shape(shape, device, dtype, iters, repeats, backward):
    batch, nheads, seqlen, headdim = shape
    q, k, v = (torch.randn(batch, seqlen, nheads, headdim, dtype=dtype, device=device) for _ in range(3))
    qs, ks, vs = (sdpa_layout(t) for t in (q, k, v))
    rows = {
        "c_abi": time_per_call(direct_c_call(q, k, v), iters, repeats, device),
        "flashcore": time_per_call(lambda: flashcore.flash_attn_func(q, k, v), iters, repeats, device),
        "sdpa": time_per_call(lambda: F.scaled_dot_product_attention(qs, ks, vs), iters, repeats, device),
    }
    if backward:
        qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
        dout = torch.randn_like(q)

        def flash_step():
            flashcore.flash_attn_func(qg, kg, vg).backward(dout)

        def sdpa_step():
            F.scaled_dot_product_attention(*(sdpa_layout(t) for t in (qg, kg, vg))).backward(sdpa_layout(dout))

        rows["flashcore fwd+bwd"] = time_per_call(flash_step, iters, repeats, device)
        rows["sdpa fwd+bwd"] = time_per_call(sdpa_step, iters, repeats, device)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    parser.add_argument("--iters", type=int, default=None,
                        help="calls per timed batch at the main shape (default: 200 cuda, 20 cpu; the tiny shape "
                             "takes 1000)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backward", action="store_true", help="also time forward+backward")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    iters = args.iters or (200 if args.device == "cuda" else 20)

    print(f"flashcore {flashcore.__version__} ({lib.LIBRARY_PATH}), torch {torch.__version__}, device {args.device}"
          + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else f", {torch.get_num_threads()} threads"))
    for shape, shape_iters in [((1, 8, 512, 64), iters), ((1, 1, 16, 64), 1000)]:
        rows = bench_shape(shape, args.device, dtype, shape_iters, args.repeats, args.backward)
        batch, nheads, seqlen, headdim = shape
        print(f"\nB={batch} H={nheads} S={seqlen} D={headdim} {args.dtype}, "
              f"median of {args.repeats} x {shape_iters} calls")
        print(f"  {'':20s}{'host us/call':>14s}{'wall us/call':>14s}")
        for name, (host, wall) in rows.items():
            print(f"  {name:20s}{host:14.1f}{wall:14.1f}")
        overhead = rows["flashcore"][0] - rows["c_abi"][0]
        print(f"  binding overhead (flashcore - c_abi, host): {overhead:.1f} us")


if __name__ == "__main__":
    main()
