"""Session 9's probes of the sm90 forward's >= 2k cells (d128 / d256 non-causal 2k), two modes.

  python3 s9_probe.py waves   the wave tail: the same cell at a (batch, heads) giving the usual tile
                              count (d256 2k: 8 x 8 -> 1024 tiles = 7.76 waves of 132 CTAs; d128 2k:
                              8 x 16 -> 2048 = 15.5) and one giving whole waves (6 x 11 -> 1056 = 8.0;
                              12 x 11 -> 2112 = 16.0), flashcore (library, variants) and cuDNN in turn.
                              TFLOP/s equal in both: the partial last wave costs nothing measurable.
  python3 s9_probe.py ncu     each cell once, for `ncu --kernel-name regex:...`: the library, the
                              variants of PROBE_VARIANTS ("bf16:256:20,..."), and SDPA's cuDNN backend.
"""
import os
import sys

import torch
from torch.nn.attention import SDPBackend

import bench
import fc_sm90

DT = dict(bf16=torch.bfloat16, fp16=torch.float16)
CELLS = [("bf16", 256, 2048), ("bf16", 128, 2048)]  # non-causal
VARIANTS = {}  # (dtype, d) -> variant numbers
for spec in filter(None, os.environ.get("PROBE_VARIANTS", "").split(",")):
    dn, d, v = spec.split(":")
    VARIANTS.setdefault((dn, int(d)), []).append(int(v))


def tensors(dn, b, h, s, d):
    q = torch.randn(b, s, h, d, device="cuda", dtype=DT[dn])
    return q, torch.randn_like(q), torch.randn_like(q)


def impls(dn, d, q, k, v):
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[0], q.shape[2], q.shape[1], device="cuda", dtype=torch.float32)

    def fc(variant):
        def run():
            fc_sm90.VARIANT = variant
            return fc_sm90.forward(q, k, v, False, out=out, lse=lse)
        return run
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    fns = {"flashcore": fc(-1)}
    for var in VARIANTS.get((dn, d), []):
        fns[f"variant{var}"] = fc(var)
    fns["cudnn"] = lambda: bench._sdpa(SDPBackend.CUDNN_ATTENTION, qt, kt, vt, False)
    return fns


def warm_clocks():
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(200):
        x @ x
    torch.cuda.synchronize()


def waves():
    warm_clocks()
    shapes = {256: [(8, 8), (6, 11)], 128: [(8, 16), (12, 11)]}
    for dn, d, s in CELLS + [("fp16", 256, 2048)]:
        for b, h in shapes[d]:
            q, k, v = tensors(dn, b, h, s, d)
            f = bench.flops(b, h, s, s, d, False)
            tiles = b * h * (s // 128)
            fns = impls(dn, d, q, k, v)
            t = {name: [] for name in fns}
            for _ in range(2):
                for name, fn in list(fns.items()) + list(fns.items())[::-1]:
                    t[name].append(f / bench.time_ms(fn, iters=10, reps=5) / 1e9)
            line = "  ".join(f"{n} {sorted(x)[len(x) // 2]:6.1f} [{min(x):.0f}-{max(x):.0f}]" for n, x in t.items())
            print(f"waves {dn} d{d} S{s} B{b} H{h}: {tiles} tiles = {tiles / 132:.2f} waves: {line}", flush=True)
            del q, k, v


def ncu():
    for dn, d, s in CELLS:
        b, h = 16384 // s, 2048 // d
        q, k, v = tensors(dn, b, h, s, d)
        for name, fn in impls(dn, d, q, k, v).items():
            fn()
            torch.cuda.synchronize()
            print(f"ncu cell {dn} d{d} S{s} B{b} H{h}: {name}", flush=True)


if __name__ == "__main__":
    {"waves": waves, "ncu": ncu}[sys.argv[1]]()
    sys.exit(0)
