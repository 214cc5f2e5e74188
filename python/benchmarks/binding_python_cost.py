"""The Python side of flashcore's per-call cost, with the library's work taken out.

flashcore_forward, flashcore_backward and flashcore_backward_workspace_size are replaced by a C
function that returns 0 at once (a CPU build's flashcore_built_with_cuda, called with the same
argument types: one ctypes transition, no work), so what is timed is the binding alone: checks,
allocation of the outputs, packing the arguments, the autograd Function, the ctypes call. CPU
tensors; the CUDA-only steps (stream, device guard, workspace) are not in it. Outputs are left
uninitialised, so the shape is tiny to keep autograd's gradient accumulation negligible.

    python python/benchmarks/binding_python_cost.py [--calls N]

Times are CPU time of this thread (time.thread_time_ns), the best of 7 batches, so that other
processes on a shared machine disturb them less.
"""

import argparse
import ctypes
import time

import torch

import flashcore
from flashcore import _library as lib


def stub_library():
    if flashcore.built_with_cuda():
        raise SystemExit("binding_python_cost.py needs a CPU build of the library (FLASHCORE_LIBRARY): its "
                         "flashcore_built_with_cuda returns 0, which stands in for the library's calls")
    address = ctypes.cast(lib._lib.flashcore_built_with_cuda, ctypes.c_void_p).value
    for name in ("forward", "backward", "backward_workspace_size"):
        real = getattr(lib, name)
        stub = type(real)(address)
        stub.argtypes, stub.restype = real.argtypes, real.restype
        setattr(lib, name, stub)


def best_of(fn, calls, batches=7):
    for _ in range(max(100, calls // 20)):
        fn()
    times = []
    for _ in range(batches):
        start = time.thread_time_ns()
        for _ in range(calls):
            fn()
        times.append((time.thread_time_ns() - start) / calls / 1e3)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    stub_library()
    q, k, v = (torch.randn(1, 16, 1, 64, dtype=torch.float16) for _ in range(3))
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    dout = torch.randn_like(q)
    print(f"flashcore {flashcore.__version__}, torch {torch.__version__}: Python cost per call, library stubbed, "
          f"B=1 H=1 S=16 D=64 float16 CPU tensors")
    print(f"  forward, no grad   {best_of(lambda: flashcore.flash_attn_func(q, k, v), args.calls):7.2f} us")
    print(f"  forward, grad      {best_of(lambda: flashcore.flash_attn_func(qg, kg, vg), args.calls):7.2f} us")
    print(f"  forward+backward   "
          f"{best_of(lambda: flashcore.flash_attn_func(qg, kg, vg).backward(dout), args.calls // 4):7.2f} us")
    qs, ks, vs = (t.transpose(1, 2) for t in (q, k, v))
    print(f"  (for scale: SDPA's forward on the same CPU tensors, its math included: "
          f"{best_of(lambda: torch.nn.functional.scaled_dot_product_attention(qs, ks, vs), args.calls):.2f} us)")


if __name__ == "__main__":
    main()
