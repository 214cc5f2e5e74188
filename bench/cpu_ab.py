"""Two builds of flashcore's CPU backend against each other in one process (a before/after check on
a shared machine, where separate runs see different load).

A is the library the binding loads (FLASHCORE_LIBRARY), B a second libflashcore_c.so (--b); B's
flashcore_forward / flashcore_backward are swapped into the binding for its calls. Calls alternate
A, B, A, B, ...; each side reports the median wall time and process CPU time of --reps calls after
one warm-up each. B/A below 1 means B is faster.

    cp build/cpu/src/c_api/libflashcore_c.so /tmp/before.so    # then change, rebuild
    PYTHONPATH=python FLASHCORE_LIBRARY=/tmp/before.so .venv/bin/python bench/cpu_ab.py \\
        --b build/cpu/src/c_api/libflashcore_c.so --dtype fp32 --pass fwd --threads 1
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--b", required=True, help="the second libflashcore_c.so")
    ap.add_argument("--dtype", default="fp32", choices=sorted(DTYPES))
    ap.add_argument("--pass", dest="pass_", default="fwd", choices=["fwd", "fwd_bwd"])
    ap.add_argument("--head-dims", default="64,128")
    ap.add_argument("--seqlens", default="1024")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()

    import flashcore
    from flashcore import _library as lib
    torch.set_num_threads(args.threads)
    lib_b = ctypes.CDLL(args.b)
    sides = {"A": (lib.forward, lib.backward)}
    fwd_b, bwd_b = lib_b.flashcore_forward, lib_b.flashcore_backward
    for mine, theirs in ((fwd_b, lib.forward), (bwd_b, lib.backward)):
        mine.argtypes, mine.restype = theirs.argtypes, theirs.restype
    sides["B"] = (fwd_b, bwd_b)

    for d in (int(x) for x in args.head_dims.split(",")):
        for s in (int(x) for x in args.seqlens.split(",")):
            for causal in (bool(int(x)) for x in args.causal.split(",")):
                q, k, v, grad = (torch.randn(1, s, args.heads, d).to(DTYPES[args.dtype]) for _ in range(4))
                qg, kg, vg = (t.clone().requires_grad_(True) for t in (q, k, v))

                def call():
                    if args.pass_ == "fwd":
                        with torch.no_grad():
                            flashcore.flash_attn_func(q, k, v, causal=causal)
                    else:
                        flashcore.flash_attn_func(qg, kg, vg, causal=causal).backward(grad)

                wall = {name: [] for name in sides}
                cpu = {name: [] for name in sides}
                for i in range(args.reps + 1):
                    for name, (fwd, bwd) in sides.items():
                        lib.forward, lib.backward = fwd, bwd
                        c0, t0 = time.process_time(), time.perf_counter()
                        call()
                        if i > 0:  # the first round warms up
                            wall[name].append((time.perf_counter() - t0) * 1e3)
                            cpu[name].append((time.process_time() - c0) * 1e3)
                lib.forward, lib.backward = sides["A"]
                ca, cb = statistics.median(cpu["A"]), statistics.median(cpu["B"])
                wa, wb = statistics.median(wall["A"]), statistics.median(wall["B"])
                print(f"{args.pass_} {args.dtype} d{d} s{s} causal={int(causal)} threads={args.threads}: "
                      f"CPU ms A {ca:8.1f} B {cb:8.1f} B/A {cb / ca:.3f}; wall B/A {wb / wa:.3f}; "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
