"""A few small shapes through the sm90 forward, for compute-sanitizer (no reference; the
sanitizer reports are the result)."""
import os

import torch

import fc_sm90

shapes = [  # b, sq, sk, hq, hkv, d, causal
    (1, 200, 300, 2, 1, 64, False), (1, 300, 200, 2, 2, 128, True), (2, 129, 129, 4, 2, 72, True),
    (1, 1, 1, 1, 1, 128, False), (1, 257, 513, 2, 2, 256, True), (1, 100, 100, 2, 2, 192, False),
    (1, 400, 300, 2, 2, 64, True), (1, 300, 500, 2, 1, 128, False), (1, 600, 600, 1, 1, 64, False),
    # past the small-problem tile: several 192-row tiles per CTA (two Q buffers), causal zig-zag
    # bottom-aligned; d128 short-keys tile with two tiles per CTA
    (4, 1400, 650, 8, 2, 64, False), (2, 700, 650, 8, 2, 64, True), (3, 1100, 900, 8, 2, 128, False),
    # s8, clusters of 2 CTAs sharing K/V (non-causal d128/d256): an odd m_block count (a CTA past
    # seqlen_q), ragged keys, several items per cluster, the d128 main tile past 4k keys
    (1, 300, 260, 2, 1, 256, False), (2, 700, 1000, 8, 2, 256, False), (1, 200, 4200, 2, 1, 128, False),
    # s9, the next tile's Q prefetched into L2: more tiles / zig-zag items than the 132-CTA grid, so
    # CTAs prefetch for a second tile (d256 non-causal 160 tiles, d128 causal 160 items, GQA)
    (2, 600, 500, 16, 2, 256, False), (1, 600, 600, 64, 8, 128, True),
    # v13, d256 causal with 8/16-byte O stores: 9 m_blocks (the middle ones paired across heads, the
    # grid 52 rows above row 0), 144 zig-zag items on 132 CTAs, GQA 4:1
    (2, 1100, 1100, 16, 4, 256, True),
]
# SAN_SHAPES="12,13,14": only these shapes (indices into the list).
only = {int(x) for x in os.environ.get("SAN_SHAPES", "").split(",") if x}
shapes = [sh for i, sh in enumerate(shapes) if not only or i in only]
# SAN_VARIANTS="128:16,256:17": non-causal shapes of that head dim run that dev variant.
variants = {int(x.split(":")[0]): int(x.split(":")[1]) for x in os.environ.get("SAN_VARIANTS", "").split(",") if x}
# SAN_VARIANTS_CAUSAL=1: causal shapes run the variant too; =only: causal shapes only.
variants_causal = os.environ.get("SAN_VARIANTS_CAUSAL") in ("1", "only")
variants_noncausal = os.environ.get("SAN_VARIANTS_CAUSAL") != "only"
skip = {int(x) for x in os.environ.get("SAN_SKIP_DIMS", "").split(",") if x}  # dims a partial build lacks
for dtype in (torch.bfloat16,):
    for b, sq, sk, hq, hkv, d, causal in shapes:
        if fc_sm90.kernel_dim(d) in skip:
            continue
        q = torch.randn(b, sq, hq, d, device="cuda", dtype=dtype)
        k = torch.randn(b, sk, hkv, d, device="cuda", dtype=dtype)
        v = torch.randn(b, sk, hkv, d, device="cuda", dtype=dtype)
        lse = torch.empty(b, hq, sq, device="cuda", dtype=torch.float32)
        if variants:
            wanted = variants_causal if causal else variants_noncausal
            fc_sm90.VARIANT = variants.get(d, -1) if wanted else -1
        fc_sm90.forward(q, k, v, causal, lse=lse)
torch.cuda.synchronize()
print("san.py done")
