"""A few small shapes through the sm90 forward, for compute-sanitizer (no reference; the
sanitizer reports are the result)."""
import torch

import fc_sm90

shapes = [  # b, sq, sk, hq, hkv, d, causal
    (1, 200, 300, 2, 1, 64, False), (1, 300, 200, 2, 2, 128, True), (2, 129, 129, 4, 2, 72, True),
    (1, 1, 1, 1, 1, 128, False), (1, 257, 513, 2, 2, 256, True), (1, 100, 100, 2, 2, 192, False),
    (1, 400, 300, 2, 2, 64, True), (1, 300, 500, 2, 1, 128, False), (1, 600, 600, 1, 1, 64, False),
]
for dtype in (torch.bfloat16,):
    for b, sq, sk, hq, hkv, d, causal in shapes:
        q = torch.randn(b, sq, hq, d, device="cuda", dtype=dtype)
        k = torch.randn(b, sk, hkv, d, device="cuda", dtype=dtype)
        v = torch.randn(b, sk, hkv, d, device="cuda", dtype=dtype)
        lse = torch.empty(b, hq, sq, device="cuda", dtype=torch.float32)
        fc_sm90.forward(q, k, v, causal, lse=lse)
torch.cuda.synchronize()
print("san.py done")
