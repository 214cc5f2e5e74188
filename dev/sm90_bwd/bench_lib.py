"""Backward through the library as a user calls it (flashcore.flash_attn_func + autograd, kernels=auto,
FLASHCORE_LIBRARY), default and deterministic mode, against SDPA's cuDNN backend in the same process:
the deterministic mode's cost beside the default, for every head dim the sm90 backward serves.
Not the project's benchmark (bench/, which has no deterministic column); a dev look only.
CUDA events, 3 warm-ups, mean of 10, no L2 flush; FLOPs 2.5 x 4*B*H*S^2*D, halved when causal."""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashcore


def timeit(fn, iters=10):
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
    rows = []
    for dtype in (torch.bfloat16,):
        for d in (64, 96, 128):
            h = 2048 // d if d != 96 else 16
            for (b, s, causal) in ((4, 4096, False), (4, 4096, True)):
                q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(4))
                for t in (q, k, v):
                    t.requires_grad_(True)
                f = 2.5 * 4 * b * h * s * s * d / (2 if causal else 1)
                qt, kt, vt = (t.detach().transpose(1, 2).contiguous().requires_grad_(True) for t in (q, k, v))
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                    dot = do.transpose(1, 2).contiguous()
                    t_cudnn = timeit(lambda: torch.autograd.grad(o, (qt, kt, vt), dot, retain_graph=True))
                row = f"{str(dtype)[6:]} d{d} b{b} h{h} s{s} causal={int(causal)}: cuDNN {f / t_cudnn / 1e12:.0f}"
                for name, det in (("flashcore", False), ("deterministic", True)):
                    out = flashcore.flash_attn_func(q, k, v, causal=causal, deterministic=det)
                    t = timeit(lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True))
                    row += f", {name} {f / t / 1e12:.0f} ({t_cudnn / t:.2f}x)"
                print(row + " TFLOP/s", flush=True)
                del q, k, v, do, qt, kt, vt, o
    return 0


if __name__ == "__main__":
    sys.exit(main())
