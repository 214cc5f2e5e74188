"""A/B of dev variants against each other and SDPA's cuDNN backend, with the order rotated every
round so that no implementation always runs in the same place of the sequence (session 9's first
A/B read higher for whatever ran right after cuDNN: clocks / power, not the kernels).

  FC_LIB=libfc_s9b.so AB_VARIANTS=24,20,25 CELLS="bf16:256:0:2048,4096;..." ROUNDS=4 python3 s9_ab.py

A cell spec may name its own variants after "@" (e.g. "bf16:128:0:2048,4096@-1,28"; -1 = the
library), overriding AB_VARIANTS for its cells. Each round times every implementation once (ITERS calls queued between two events, median of 5);
the table gives each one's median over the rounds, its [min-max], and the ratio to cuDNN's median.
Writes $OUT/$BENCH_NAME (default s9_ab.json)."""
import json
import os
import sys

import torch
from torch.nn.attention import SDPBackend

import bench
import fc_sm90

DT = dict(bf16=torch.bfloat16, fp16=torch.float16)
VARIANTS = [int(v) for v in os.environ.get("AB_VARIANTS", "24,20,25").split(",")]
ROUNDS = int(os.environ.get("ROUNDS", "4"))
ITERS = int(os.environ.get("ITERS", "10"))


def main():
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(300):  # clocks up (an idle H100 reads 345 MHz)
        x @ x
    torch.cuda.synchronize()
    del x
    rows = []
    for spec in os.environ.get("CELLS", "bf16:256:0:2048,4096,8192;bf16:256:1:2048,4096").split(";"):
        spec, _, own = spec.partition("@")
        cell_variants = [int(v) for v in own.split(",")] if own else VARIANTS
        dn, d, causal, seqs = spec.split(":")
        d, causal = int(d), causal == "1"
        for s in (int(v) for v in seqs.split(",")):
            b, h = 16384 // s, 2048 // d
            q = torch.randn(b, s, h, d, device="cuda", dtype=DT[dn])
            k, v = torch.randn_like(q), torch.randn_like(q)
            out = torch.empty_like(q)
            lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
            qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
            f = bench.flops(b, h, s, s, d, causal)

            def variant(n):
                def run():
                    fc_sm90.VARIANT = n
                    return fc_sm90.forward(q, k, v, causal, out=out, lse=lse)
                return run
            fns = {f"v{n}": variant(n) for n in cell_variants}
            fns["cudnn"] = lambda: bench._sdpa(SDPBackend.CUDNN_ATTENTION, qt, kt, vt, causal)  # noqa: E731
            names = list(fns)
            t = {n: [] for n in names}
            for r in range(ROUNDS):
                order = names[r % len(names):] + names[:r % len(names)]
                for n in order:
                    t[n].append(f / bench.time_ms(fns[n], iters=ITERS, reps=5) / 1e9)
            med = {n: sorted(x)[len(x) // 2] for n, x in t.items()}
            line = "  ".join(f"{n} {med[n]:6.1f} [{min(t[n]):.0f}-{max(t[n]):.0f}] ({med[n] / med['cudnn']:.3f})"
                             for n in names)
            print(f"{dn} d{d} {'causal' if causal else 'full  '} S{s:6d}: {line}", flush=True)
            rows.append(dict(dtype=dn, d=d, causal=causal, seqlen=s, batch=b, heads=h, variants=cell_variants, **t))
            del q, k, v, out, lse
    o = os.environ.get("OUT")
    if o:
        with open(os.path.join(o, os.environ.get("BENCH_NAME", "s9_ab.json")), "w") as fh:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, variants=VARIANTS,
                           rounds=ROUNDS, iters=ITERS, rows=rows), fh)


if __name__ == "__main__":
    sys.exit(main())
