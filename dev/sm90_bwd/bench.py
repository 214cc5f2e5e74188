"""Quick timing of the sm90 backward (preprocess + main + convert, workspace allocated outside the
timed loop) against SDPA's cuDNN backend's backward, same shapes, same run. Not the project's
benchmark (bench/): a first look only."""
import json
import os
import sys

import torch
import torch.nn.functional as F

import fc_sm90_bwd


def flops_bwd(b, h, s, d, causal):
    f = 4 * b * h * s * s * d * 2.5  # 5 GEMMs of 2*b*h*s*s*d, as FlashAttention counts backward
    return f / 2 if causal else f


def timeit(fn, iters=int(os.environ.get("BENCH_ITERS", "20"))):
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters * 1e-3


def main():
    dtype = torch.float16 if os.environ.get("BENCH_FP16") else torch.bfloat16
    d = int(os.environ.get("BENCH_D", "128"))  # the harness's kernels: build.sh's TUS
    h = 2048 // d
    hkv = h // int(os.environ.get("BENCH_GQA", "1"))  # GQA ratio (SDPA with enable_gqa)
    for (b, s, causal) in [(4, 4096, False), (4, 4096, True), (1, 16384, False), (1, 16384, True), (8, 2048, True)]:
        q, do = (torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(2))
        k, v = (torch.randn(b, s, hkv, d, device="cuda", dtype=dtype) for _ in range(2))
        qt, kt, vt = (t.transpose(1, 2).detach().requires_grad_(True) for t in (q, k, v))
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
            o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=hkv != h)
            t_cudnn = timeit(lambda: torch.autograd.grad(o, (qt, kt, vt), do.transpose(1, 2), retain_graph=True))
        # O and LSE for our backward from the math path is too slow at 16k: use cuDNN's O and recompute LSE
        # in chunks (values only matter for realism, not timing).
        out = o.detach().transpose(1, 2).contiguous()
        lse = torch.zeros(b, h, s, device="cuda", dtype=torch.float32)
        dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
        f = flops_bwd(b, h, s, d, causal)
        row = f"{str(dtype)[6:]} b{b} h{h}/{hkv} s{s} d{d} causal={causal}: cuDNN {f / t_cudnn / 1e12:.0f}"
        variants = [int(x) for x in os.environ.get("VARIANTS", "").split(",") if x]
        det_variants = [int(x) for x in os.environ.get("DET_VARIANTS", "").split(",") if x]  # timed deterministic
        # Forced kv splits (BwdParams::forced_kv_splits) for the variants' default-mode columns too.
        splits = [int(x) for x in os.environ.get("BENCH_SPLITS", "").split(",") if x]
        shape = dict(dtype=str(dtype)[6:], d=d, b=b, hq=h, hkv=hkv, s=s, causal=causal)
        runs = [("cudnn", None, 0, t_cudnn)]
        for name, kw, force in (("flashcore", {}, 0), ("deterministic", dict(deterministic=True), 0),
                                *((f"variant{v}", dict(variant=v), 0) for v in variants),
                                *((f"variant{v}-S{n}", dict(variant=v), n) for v in variants for n in splits),
                                *((f"variant{v}-det", dict(variant=v, deterministic=True), 0) for v in det_variants)):
            fc_sm90_bwd.force_kv_splits(force)
            try:
                t = timeit(lambda: fc_sm90_bwd.backward(do, q, k, v, out, lse, causal, dq, dk, dv, **kw))
            finally:
                fc_sm90_bwd.force_kv_splits(0)
            row += f", {name} {f / t / 1e12:.0f} ({t_cudnn / t:.2f}x)"
            runs.append((name, kw.get("variant", -1), force, t))
        print(row + " TFLOP/s", flush=True)
        if os.environ.get("OUT"):  # one JSON line per timing, for bench/results (ab_to_json.py's sibling)
            with open(os.path.join(os.environ["OUT"], "bench_rows.jsonl"), "a") as fh:
                for name, variant, force, t in runs:
                    fh.write(json.dumps(dict(name=name, variant=variant, splits=force, ms=t * 1e3,
                                             tflops=f / t / 1e12, cudnn_ms=t_cudnn * 1e3, **shape)) + "\n")


if __name__ == "__main__":
    sys.exit(main())
