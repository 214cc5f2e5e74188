"""Quick timing of the sm90 backward (preprocess + main + convert, workspace allocated outside the
timed loop) against SDPA's cuDNN backend's backward, same shapes, same run. Not the project's
benchmark (bench/): a first look only."""
import os
import sys

import torch
import torch.nn.functional as F

import fc_sm90_bwd


def flops_bwd(b, h, s, d, causal):
    f = 4 * b * h * s * s * d * 2.5  # 5 GEMMs of 2*b*h*s*s*d, as FlashAttention counts backward
    return f / 2 if causal else f


def timeit(fn, iters=20):
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
        for name, kw in (("flashcore", {}), ("deterministic", dict(deterministic=True)),
                         *((f"variant{v}", dict(variant=v)) for v in variants),
                         *((f"variant{v}-det", dict(variant=v, deterministic=True)) for v in det_variants)):
            t = timeit(lambda: fc_sm90_bwd.backward(do, q, k, v, out, lse, causal, dq, dk, dv, **kw))
            row += f", {name} {f / t / 1e12:.0f} ({t_cudnn / t:.2f}x)"
        print(row + " TFLOP/s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
