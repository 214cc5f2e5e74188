#!/usr/bin/env python3
"""Varlen against padded dense on a GPU, forward and backward (issue 16's bar: varlen with lengths
drawn from 128..4096 at >= 0.95x the dense kernel's TFLOP/s, each counted over its own real work).

    FLASHCORE_LIBRARY=.../libflashcore_c.so PYTHONPATH=python python3 bench/varlen_bench.py [out.json] [LENGTHS]

LENGTHS (optional): "NxC" for C sequences of N tokens each, or a comma list of lengths.
VARLEN_CELLS (environment, optional): the (head dim, dtype) cells, e.g. "128:bf16,64:bf16,128:fp16"
(default "128:bf16"), each with 16 heads, causal and not, forward and backward.
VARLEN_BWD_ORDERS (environment, optional): e.g. "sequences,blocks,slots": each cell again with
FLASHCORE_BWD_VARLEN_ORDER set to each (the sm90 varlen backward's work order; the library reads
it at every call), rows tagged with "order".

Lengths are drawn uniformly from [128, 4096] (seeded) until about 32k tokens; the dense twin is
the same batch padded to the longest sequence. FLOPs: 4 * d * heads * sum(len_q * len_k) (halved,
minus the diagonal, when causal), forward; the backward 2.5x that. CUDA-event medians of 10 runs.
With a path, the rows also go there as JSON (bench/results' layout; "kernels" is the family
kernels=auto picked, "reason" the ratio and the lengths).
"""
import itertools
import json
import os
import random
import statistics
import sys

import torch

import flashcore
from flashcore import flash_attn_func, flash_attn_varlen_func


def timed(fn, repeats=10, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def pairs(lens, causal):
    return sum(n * (n + 1) // 2 if causal else n * n for n in lens)


def bench_cell(lens, cu, heads, d, dtype_name, families):
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    total, longest, batch = sum(lens), max(lens), len(lens)
    print(f"varlen_bench: {batch} sequences, {total} tokens, lengths {min(lens)}..{longest}, d{d} {dtype_name}, {heads} heads")
    print(f"{'causal':>6} {'pass':>4} {'varlen ms':>10} {'varlen TF':>10} {'dense ms':>9} {'dense TF':>9} {'ratio':>6}")
    json_rows = []
    for causal in (False, True):
        q, k, v = (torch.randn(total, heads, d, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
        qd, kd, vd = (torch.randn(batch, longest, heads, d, device="cuda", dtype=dtype, requires_grad=True)
                      for _ in range(3))
        flops_v = 4 * d * heads * pairs(lens, causal)
        flops_d = 4 * d * heads * batch * pairs([longest], causal)
        out_v = flash_attn_varlen_func(q, k, v, cu, cu, longest, longest, causal=causal)
        out_d = flash_attn_func(qd, kd, vd, causal=causal)
        g_v, g_d = torch.randn_like(out_v), torch.randn_like(out_d)
        rows = {
            "fwd": (lambda: flash_attn_varlen_func(q, k, v, cu, cu, longest, longest, causal=causal),
                    lambda: flash_attn_func(qd, kd, vd, causal=causal), 1.0),
            "bwd": (lambda: torch.autograd.grad(out_v, (q, k, v), g_v, retain_graph=True),
                    lambda: torch.autograd.grad(out_d, (qd, kd, vd), g_d, retain_graph=True), 2.5),
        }
        for name, (fv, fd, factor) in rows.items():
            ms_v, ms_d = timed(fv), timed(fd)
            tf_v = factor * flops_v / ms_v / 1e9
            tf_d = factor * flops_d / ms_d / 1e9
            print(f"{'yes' if causal else 'no':>6} {name:>4} {ms_v:10.3f} {tf_v:10.1f} {ms_d:9.3f} {tf_d:9.1f} "
                  f"{tf_v / tf_d:6.3f}")
            common = {"pass": name, "dtype": dtype_name, "head_dim": d, "causal": causal, "heads": heads,
                      "heads_kv": heads}
            json_rows.append({"impl": "flashcore_varlen", "kernels": families[name][0], **common, "batch": batch,
                              "seqlen_q": longest, "seqlen_k": longest, "ms": ms_v, "tflops": tf_v,
                              "reason": f"ratio {tf_v / tf_d:.3f} vs padded dense; {total} tokens, lengths {lens}"})
            json_rows.append({"impl": "flashcore_dense_padded", "kernels": families[name][1], **common,
                              "batch": batch, "seqlen_q": longest, "seqlen_k": longest, "ms": ms_d, "tflops": tf_d,
                              "reason": "the varlen batch padded to its longest sequence"})
    return json_rows


def main():
    rng = random.Random(16)
    lens = []
    if len(sys.argv) > 2:
        spec = sys.argv[2]
        lens = [int(spec.split("x")[0])] * int(spec.split("x")[1]) if "x" in spec else [int(n) for n in spec.split(",")]
    while sum(lens) < 32768:
        lens.append(rng.randint(128, 4096))
    heads = 16
    cells = [(int(c.split(":")[0]), c.split(":")[1]) for c in os.environ.get("VARLEN_CELLS", "128:bf16").split(",")]
    total, longest, batch = sum(lens), max(lens), len(lens)
    cu = torch.tensor([0] + list(itertools.accumulate(lens)), dtype=torch.int32, device="cuda")
    # What kernels=auto runs (dispatch.cu's table): on compute capability 9.0 with the sm90 family
    # built, the sm90 forward and backward for both (the sm90 backward serves varlen at d <= 128
    # since session 11: sm90/bwd_sequence.h).
    hopper = torch.cuda.get_device_capability() == (9, 0) and "sm90" in flashcore.kernel_families
    fam = "sm90" if hopper else "sm80"
    families = {"fwd": (fam, fam), "bwd": (fam, fam)}
    forced = os.environ.get("FLASHCORE_KERNELS", "auto")
    if forced != "auto":  # the environment forces one family for every call
        families = {"fwd": (forced, forced), "bwd": (forced, forced)}
    json_rows = []
    orders = [o for o in os.environ.get("VARLEN_BWD_ORDERS", "").split(",") if o] or [None]
    for order in orders:
        if order is not None:
            os.environ["FLASHCORE_BWD_VARLEN_ORDER"] = order
            print(f"FLASHCORE_BWD_VARLEN_ORDER={order}")
        for d, dtype_name in cells:
            rows = bench_cell(lens, cu, heads, d, dtype_name, families)
            json_rows += [dict(r, order=order or os.environ.get("FLASHCORE_BWD_VARLEN_ORDER", "default")) for r in rows]
    if len(sys.argv) > 1 and sys.argv[1] != "-":
        context = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "bench": "bench/varlen_bench.py",
                   "flops": "over each call's own real work (varlen: the sequences' tokens; dense: the padded batch)"}
        with open(sys.argv[1], "w") as f:
            json.dump({"context": context, "rows": json_rows}, f, indent=1)


if __name__ == "__main__":
    main()
