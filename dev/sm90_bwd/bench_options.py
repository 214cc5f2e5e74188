"""Timing of the sm90 backward's score-option kernels against the plain sm90 backward, same library,
same run (d128 bf16; scripts/options_cost.sh's shapes): at 8k tokens (batch 2, 16 heads) each
option (a window that hides nothing but runs the option kernels, softcap 30, ALiBi, all three),
causal and not; a 1k window over 16k tokens (batch 1, 16 heads, causal) against the plain causal
16k, FLOPs over the visible scores (tools/cli/flops.h's count). Preprocess + main + convert, the
workspace allocated outside the timed loop; CUDA events, 3 warm-ups, mean of BENCH_ITERS.
Appends rows to $OUT/bench_rows.jsonl (bench/results' row fields, + option and x plain)."""
import json
import os
import sys

import torch

import fc_sm90_bwd
from bench import timeit


def visible_scores(sq, sk, causal, left, right):
    n = 0
    for i in range(sq):
        lo = 0 if left < 0 else max(0, i + sk - sq - left)
        hi = sk - 1
        if causal:
            hi = min(hi, i + sk - sq)
        if right >= 0:
            hi = min(hi, i + sk - sq + right)
        n += max(0, hi - lo + 1)
    return n


def main():
    d, dtype = 128, torch.bfloat16
    rows = []
    configs = []
    for causal in (False, True):
        s, b, h = 8192, 2, 16
        configs += [("plain", b, s, h, causal, (-1, -1), 0.0, False),
                    ("window_all", b, s, h, causal, (s - 2, -1 if causal else s - 2), 0.0, False),
                    ("softcap", b, s, h, causal, (-1, -1), 30.0, False),
                    ("alibi", b, s, h, causal, (-1, -1), 0.0, True),
                    ("softcap_alibi_window", b, s, h, causal, (s - 2, -1 if causal else s - 2), 30.0, True)]
    configs += [("plain", 1, 16384, 16, True, (-1, -1), 0.0, False),
                ("window_1k", 1, 16384, 16, True, (1024, -1), 0.0, False)]
    for name, b, s, h, causal, (left, right), softcap, alibi in configs:
        q, do = (torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(2))
        k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(2))
        out = torch.randn_like(q)
        lse = torch.full((b, h, s), 12.0, device="cuda", dtype=torch.float32)  # values only matter for realism
        dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
        slopes = (torch.rand(h, device="cuda") * 0.1) if alibi else None
        fc_sm90_bwd.set_options(left, right, softcap, slopes)
        try:
            t = timeit(lambda: fc_sm90_bwd.backward(do, q, k, v, out, lse, causal, dq, dk, dv))
        finally:
            fc_sm90_bwd.set_options()
        vis = visible_scores(s, s, causal, left, right)
        flops = 2.5 * 4 * b * h * vis * d
        row = dict(impl="flashcore", kernels="sm90", option=name, pass_="bwd", dtype="bf16", head_dim=d, causal=causal,
                   batch=b, heads=h, heads_kv=h, seqlen_q=s, seqlen_k=s, window=[left, right], softcap=softcap,
                   alibi=alibi, ms=t * 1e3, tflops=flops / t / 1e12, visible_scores=vis)
        rows.append(row)
        print(f"{name:22s} s{s} b{b} causal={int(causal)} window=({left},{right}) softcap={softcap} alibi={int(alibi)}: "
              f"{t * 1e3:.3f} ms {row['tflops']:.0f} TFLOP/s", flush=True)
        del q, do, k, v, out, dq, dk, dv
    plain = {(r["seqlen_q"], r["causal"]): r["ms"] for r in rows if r["option"] == "plain"}
    for r in rows:
        base = plain[(r["seqlen_q"], r["causal"])]
        r["x_plain_time"] = base / r["ms"]
        plain_tf = next(x["tflops"] for x in rows if x["option"] == "plain" and x["seqlen_q"] == r["seqlen_q"]
                        and x["causal"] == r["causal"])
        r["x_plain_tflops"] = r["tflops"] / plain_tf
        print(f"{r['option']:22s} s{r['seqlen_q']} causal={int(r['causal'])}: x plain {r['x_plain_tflops']:.3f} "
              f"(TFLOP/s over visible scores)", flush=True)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "bench_rows.jsonl"), "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
