#!/usr/bin/env python3
"""Dropout against PyTorch SDPA's FLASH_ATTENTION backend with the same dropout_p (issue 16's bar:
flashcore with dropout at >= 1.0x SDPA-flash with dropout, forward and forward+backward), plus
flashcore without dropout and with a softcap only (the same score-option kernel, no dropout), so
the dropout's own cost shows. d128 bf16, non-causal and causal, 2k and 8k tokens.

    FLASHCORE_LIBRARY=.../libflashcore_c.so PYTHONPATH=python python3 bench/dropout_bench.py [out.json]

FLOPs: 4 * batch * heads * seqlen^2 * d forward (halved when causal), forward+backward 3.5x that
(the backward's five products). CUDA-event medians of 10 runs after 3 warm-ups; rows are JSON with
the run context (bench/results/).
"""
import json
import os
import statistics
import subprocess
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashcore import flash_attn_func

P = 0.1
# Which flashcore kernels ran (FLASHCORE_KERNELS, default auto) and what the build held (the device
# script says): the rows carry them.
KERNELS = os.environ.get("FLASHCORE_KERNELS", "auto")
BUILD_NOTE = os.environ.get("FLASHCORE_BUILD_NOTE", "")


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


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else None
    d, dtype, heads = 128, torch.bfloat16, 16
    rows = []
    print(f"dropout_bench: d{d} bf16, {heads} heads, dropout_p {P}; ms and TFLOP/s (CUDA-event medians)")
    print(f"{'seqlen':>6} {'causal':>6} {'pass':>7} {'impl':>24} {'ms':>8} {'TFLOP/s':>8}")
    for seqlen, batch in ((2048, 8), (8192, 2)):
        for causal in (False, True):
            q, k, v = (torch.randn(batch, seqlen, heads, d, device="cuda", dtype=dtype, requires_grad=True)
                       for _ in range(3))
            g = torch.randn_like(q)
            flops = 4 * batch * heads * seqlen * seqlen * d / (2 if causal else 1)
            impls = {
                "flashcore_dropout": lambda: flash_attn_func(q, k, v, dropout_p=P, causal=causal),
                "sdpa_flash_dropout": lambda: sdpa(q, k, v, P, causal),
                "flashcore_plain": lambda: flash_attn_func(q, k, v, causal=causal),
                "flashcore_softcap_only": lambda: flash_attn_func(q, k, v, causal=causal, softcap=1000.0),
                "sdpa_flash_plain": lambda: sdpa(q, k, v, 0.0, causal),
            }
            for name, fn in impls.items():
                for pass_ in ("fwd", "fwd_bwd"):
                    if pass_ == "fwd":
                        def run():
                            with torch.no_grad():
                                fn()
                    else:
                        def run():
                            out = fn()
                            torch.autograd.grad(out, (q, k, v), g)
                    reason = ""
                    try:
                        ms = timed(run)
                    except Exception as e:  # noqa: BLE001 -- a row that failed says why
                        ms, reason = None, f"{type(e).__name__}: {e}"[:200]
                    scale = 1.0 if pass_ == "fwd" else 3.5
                    tflops = None if ms is None else flops * scale / (ms * 1e-3) / 1e12
                    rows.append({"impl": name, "kernels": KERNELS if "flashcore" in name
                                 else "sdpa FLASH_ATTENTION", "pass": pass_, "dtype": "bf16", "head_dim": d,
                                 "causal": causal, "batch": batch, "heads": heads, "heads_kv": heads,
                                 "seqlen_q": seqlen, "seqlen_k": seqlen, "dropout_p": P if "dropout" in name else 0.0,
                                 "ms": ms, "tflops": tflops, "reason": reason})
                    shown = "failed: " + reason if ms is None else f"{ms:8.3f} {tflops:8.1f}"
                    print(f"{seqlen:>6} {str(causal):>6} {pass_:>7} {name:>24} {shown}")
    for seqlen in (2048, 8192):
        for causal in (False, True):
            for pass_ in ("fwd", "fwd_bwd"):
                pick = {r["impl"]: r["ms"] for r in rows if r["seqlen_q"] == seqlen and r["causal"] == causal
                        and r["pass"] == pass_}
                if pick.get("flashcore_dropout") and pick.get("sdpa_flash_dropout"):
                    print(f"ratio vs SDPA-flash with dropout, {seqlen} causal={causal} {pass_}: "
                          f"{pick['sdpa_flash_dropout'] / pick['flashcore_dropout']:.3f}x; dropout cost vs plain "
                          f"{pick['flashcore_dropout'] / pick['flashcore_plain'] - 1:+.1%}, vs softcap-only "
                          f"{pick['flashcore_dropout'] / pick['flashcore_softcap_only'] - 1:+.1%}")
    context = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
               "commit": os.environ.get("FLASHCORE_COMMIT", ""), "dropout_p": P,
               "note": BUILD_NOTE}
    try:
        context["clocks"] = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm",
                                            "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    if out_path:
        with open(out_path, "w") as f:
            json.dump({"context": context, "rows": rows}, f, indent=1)


def sdpa(q, k, v, p, causal):
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                               v.transpose(1, 2), dropout_p=p, is_causal=causal)
    return out.transpose(1, 2)


if __name__ == "__main__":
    main()
