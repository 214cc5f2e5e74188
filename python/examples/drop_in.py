"""A flash_attn 2.x script with one line changed: the import. Runs on a GPU when there is one,
else on the CPU."""

import torch

from flashcore import flash_attn_func  # was: from flash_attn import flash_attn_func

device = "cuda" if torch.cuda.is_available() else "cpu"
batch, seqlen, nheads, headdim = 2, 256, 8, 64
q, k, v = (torch.randn(batch, seqlen, nheads, headdim, device=device, dtype=torch.float16, requires_grad=True)
           for _ in range(3))

out = flash_attn_func(q, k, v, causal=True)  # (batch, seqlen, nheads, headdim)
out.float().square().mean().backward()       # flashcore's backward fills q.grad, k.grad, v.grad

# The same attention through PyTorch's SDPA (which wants (batch, nheads, seqlen, headdim)).
sdpa = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=True)
print(f"device {device}: out {tuple(out.shape)}, max |flashcore - sdpa| = "
      f"{(out - sdpa.transpose(1, 2)).abs().max().item():.1e}, q.grad {tuple(q.grad.shape)}")
