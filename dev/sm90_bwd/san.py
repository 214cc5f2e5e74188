"""A few small shapes through the sm90 backward, for compute-sanitizer (no reference; the
sanitizer reports are the result). SAN_DIMS=64,128 keeps the shapes of those head dims (the
harness's kernels); VARIANT=v runs a dev variant (fc_sm90_bwd.py); SAN_VARIANTS=12,13,14 runs
each shape on the variant of its kernel head dim (fc_sm90_bwd_variant_dim) and skips the others."""
import os

import torch

import fc_sm90_bwd

shapes = [  # b, sq, sk, hq, hkv, d, causal, deterministic
    (1, 200, 300, 2, 1, 128, False, False), (1, 300, 200, 2, 2, 128, True, False), (1, 130, 260, 4, 2, 64, True, True),
    (1, 1, 1, 1, 1, 128, False, False), (1, 100, 300, 2, 2, 96, True, False),
    (1, 200, 300, 2, 1, 64, False, False), (1, 300, 300, 4, 2, 128, True, True), (2, 500, 400, 2, 2, 64, True, False),
    # GQA split over a cluster (default mode: 4 CTAs per kv head at 8:1, bwd_cluster_reduce.h)
    (1, 200, 260, 8, 1, 64, True, False), (1, 150, 150, 8, 2, 128, False, False),
    (1, 260, 260, 8, 2, 128, True, False),  # causal d128 split (session 11: variant 15's split kernel)
    # deterministic mode split over a cluster (session 9: the looping kernel with the cluster sum)
    (1, 300, 400, 8, 1, 64, True, True), (2, 300, 300, 8, 2, 128, False, True),
    # d256, the transposed arrangement (bwd_swapkv_*.h): ragged, causal Sq > Sk, GQA, deterministic
    (1, 200, 300, 2, 1, 256, False, False), (1, 300, 200, 2, 2, 256, True, False), (1, 130, 260, 4, 2, 256, True, True),
    (1, 1, 1, 1, 1, 256, False, False), (1, 200, 260, 8, 1, 256, True, False),  # the last: GQA split (since run 8)
]
dims = [int(x) for x in os.environ.get("SAN_DIMS", "").split(",") if x]
by_dim = {}
for v in (int(x) for x in os.environ.get("SAN_VARIANTS", "").split(",") if x):
    by_dim.setdefault(fc_sm90_bwd._LIB.fc_sm90_bwd_variant_dim(v), []).append(v)
runs = [(shape, v) for shape in shapes for v in (by_dim.get(fc_sm90_bwd.kernel_dim(shape[5]), []) if by_dim else [None])]
for (b, sq, sk, hq, hkv, d, causal, det), variant in runs:
    if dims and d not in dims:
        continue
    q, dout = (torch.randn(b, sq, hq, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(b, sk, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    out = torch.randn_like(q)
    lse = torch.randn(b, hq, sq, device="cuda", dtype=torch.float32) + 5
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    ws = fc_sm90_bwd.backward(dout, q, k, v, out, lse, causal, dq, dk, dv, deterministic=det, variant=variant)
    torch.cuda.synchronize()
print("san.py done")
