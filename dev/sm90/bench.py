"""TFLOP/s of flashcore's sm90 forward next to SDPA's cuDNN and FlashAttention-2 backends, in one
run: B*S = 16k tokens, H*D = 2048, S 512..16k, causal and not, d 64/128/256, bf16 and fp16.
CUDA-event medians after warm-up. Writes bench.json into $OUT if set."""
import json
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

import fc_sm90

DEV = "cuda"


def time_ms(fn, iters=10, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def flops(b, h, sq, sk, d, causal):
    f = 4 * b * h * sq * sk * d
    return f / 2 if causal else f


def main():
    dims = [int(x) for x in os.environ.get("DIMS", "64,128,256").split(",")]
    seqs = [int(x) for x in os.environ.get("SEQS", "512,1024,2048,4096,8192,16384").split(",")]
    dtypes = [dict(bf16=torch.bfloat16, fp16=torch.float16)[x] for x in os.environ.get("DTYPES", "bf16,fp16").split(",")]
    rows = []
    for dtype in dtypes:
        for d in dims:
            for causal in (False, True):
                for s in seqs:
                    b, h = 16384 // s, 2048 // d
                    q = torch.randn(b, s, h, d, device=DEV, dtype=dtype)
                    k = torch.randn_like(q)
                    v = torch.randn_like(q)
                    out = torch.empty_like(q)
                    lse = torch.empty(b, h, s, device=DEV, dtype=torch.float32)
                    f = flops(b, h, s, s, d, causal)
                    row = dict(dtype=str(dtype).split(".")[-1], d=d, causal=causal, seqlen=s, batch=b, heads=h)
                    row["flashcore_sm90"] = f / time_ms(lambda: fc_sm90.forward(q, k, v, causal, out=out, lse=lse)) / 1e9
                    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
                    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("fa2", SDPBackend.FLASH_ATTENTION)):
                        try:
                            with sdpa_kernel(backend):
                                row[name] = f / time_ms(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)) / 1e9
                        except Exception as e:  # noqa: BLE001
                            row[name] = None
                    rows.append(row)
                    r_c = row["flashcore_sm90"] / row["cudnn"] if row["cudnn"] else float("nan")
                    r_f = row["flashcore_sm90"] / row["fa2"] if row["fa2"] else float("nan")
                    print(f"{row['dtype']} d{d} {'causal' if causal else 'full  '} S{s:6d}: sm90 {row['flashcore_sm90']:6.1f}"
                          f"  cudnn {row['cudnn'] or 0:6.1f}  fa2 {row['fa2'] or 0:6.1f}  x cudnn {r_c:.3f}  x fa2 {r_f:.3f}", flush=True)
                    del q, k, v, out, lse
    # Small-shape latency: B=1, H=8, S=512, D=64 fp16, eager.
    q = torch.randn(1, 512, 8, 64, device=DEV, dtype=torch.float16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    out = torch.empty_like(q)
    lat = dict(flashcore_sm90=time_ms(lambda: fc_sm90.forward(q, k, v, False, out=out), iters=50) * 1e3)
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("fa2", SDPBackend.FLASH_ATTENTION)):
        with sdpa_kernel(backend):
            lat[name] = time_ms(lambda: F.scaled_dot_product_attention(qt, kt, vt), iters=50) * 1e3
    print("latency us (1x8x512x64 fp16, eager, event median):", {k: round(x, 1) for k, x in lat.items()})
    o = os.environ.get("OUT")
    if o:
        with open(os.path.join(o, os.environ.get("BENCH_NAME", "bench.json")), "w") as fh:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows, latency_us=lat), fh)


if __name__ == "__main__":
    sys.exit(main())
