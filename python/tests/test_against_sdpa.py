"""flashcore next to PyTorch's own attention (torch.nn.functional.scaled_dot_product_attention):
both measured against the float64 reference, and a small transformer block trained a few steps
with each giving matching losses. The CUDA cases are the ones that matter; the CPU cases keep the
tests themselves exercised in CI."""

import pytest
import torch
import torch.nn.functional as F

import reference
from flashcore import flash_attn_func


def sdpa(q, k, v, causal):
    """SDPA in flash_attn's layout. Its is_causal aligns the mask top-left, so the bottom-right
    mask flash_attn uses is passed explicitly (as `True = may attend`)."""
    group = q.shape[2] // k.shape[2]
    q, k, v = (t.transpose(1, 2) for t in (q, k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)))
    mask = None
    if causal:
        mask = ~reference.bottom_right_causal_mask(q.shape[2], k.shape[2], q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("seqlen_q,seqlen_k,nheads,nheads_k,causal", [
    (128, 128, 8, 8, True),
    (77, 200, 8, 2, True),
    (200, 200, 4, 1, False),
])
def test_matches_sdpa_accuracy(device, dtype, seqlen_q, seqlen_k, nheads, nheads_k, causal):
    """flashcore's error against float64 is within 2x SDPA's (plus the noise floor), forward and
    backward."""
    q = torch.randn(2, seqlen_q, nheads, 64, dtype=dtype, device=device, requires_grad=True)
    k = torch.randn(2, seqlen_k, nheads_k, 64, dtype=dtype, device=device, requires_grad=True)
    v = torch.randn(2, seqlen_k, nheads_k, 64, dtype=dtype, device=device, requires_grad=True)
    dout = torch.randn(2, seqlen_q, nheads, 64, dtype=dtype, device=device)

    out = flash_attn_func(q, k, v, causal=causal)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    out_sdpa = sdpa(q, k, v, causal)
    grads_sdpa = torch.autograd.grad(out_sdpa, (q, k, v), dout)
    leaves64 = [t.detach().double().requires_grad_() for t in (q, k, v)]
    out64, _ = reference.attention(*leaves64, causal=causal)
    grads64 = torch.autograd.grad(out64, leaves64, dout.double())

    reference.assert_accurate("out vs sdpa", out, out64, out_sdpa, 2.0)
    for name, got, want, theirs in zip(("dq", "dk", "dv"), grads, grads64, grads_sdpa):
        reference.assert_accurate(f"{name} vs sdpa", got, want, theirs, 2.0)


@pytest.mark.parametrize("seqlen_q,seqlen_k,nheads,nheads_k,causal", [
    (77, 200, 8, 2, True),
    (200, 200, 4, 1, False),
])
def test_float32_on_the_cpu_matches_sdpa_accuracy(seqlen_q, seqlen_k, nheads, nheads_k, causal):
    """float32 inputs run on the CPU backend (the CUDA backend takes fp16/bf16 only), held to the
    same rule against float64 with torch's float32 SDPA as the plain implementation."""
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, s, h, 64, generator=gen).requires_grad_()
               for s, h in ((seqlen_q, nheads), (seqlen_k, nheads_k), (seqlen_k, nheads_k)))
    dout = torch.randn(2, seqlen_q, nheads, 64, generator=gen)
    out = flash_attn_func(q, k, v, causal=causal)
    assert out.dtype == torch.float32
    grads = torch.autograd.grad(out, (q, k, v), dout)
    out_sdpa = sdpa(q, k, v, causal)
    grads_sdpa = torch.autograd.grad(out_sdpa, (q, k, v), dout)
    leaves64 = [t.detach().double().requires_grad_() for t in (q, k, v)]
    out64, _ = reference.attention(*leaves64, causal=causal)
    grads64 = torch.autograd.grad(out64, leaves64, dout.double())
    reference.assert_accurate("out vs sdpa", out, out64, out_sdpa, 2.0)
    for name, got, want, theirs in zip(("dq", "dk", "dv"), grads, grads64, grads_sdpa):
        reference.assert_accurate(f"{name} vs sdpa", got, want, theirs, 3.0)


class Block(torch.nn.Module):
    """A pre-norm transformer block whose attention is `attention(q, k, v)` in flash_attn's layout."""

    def __init__(self, dim, nheads, attention):
        super().__init__()
        self.nheads, self.attention = nheads, attention
        self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))

    def forward(self, x):
        batch, seqlen, dim = x.shape
        qkv = self.qkv(self.norm1(x)).view(batch, seqlen, 3, self.nheads, dim // self.nheads)
        q, k, v = qkv.unbind(dim=2)
        x = x + self.proj(self.attention(q, k, v).reshape(batch, seqlen, dim))
        return x + self.mlp(self.norm2(x))


def train(device, attention, steps):
    torch.manual_seed(1)
    dim, vocab = 128, 97
    model = torch.nn.Sequential(torch.nn.Embedding(vocab, dim), Block(dim, 4, attention), torch.nn.Linear(dim, vocab))
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    tokens = torch.randint(0, vocab, (4, 65), device=device)
    losses = []
    for _ in range(steps):
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_training_matches_sdpa(device):
    steps = 8
    flash = train(device, lambda q, k, v: flash_attn_func(q, k, v, causal=True), steps)
    theirs = train(device, lambda q, k, v: sdpa(q, k, v, causal=True), steps)
    assert flash[-1] < flash[0], f"the loss did not go down: {flash}"
    for step, (a, b) in enumerate(zip(flash, theirs)):
        assert abs(a - b) <= 2e-2 * abs(b), f"step {step}: flashcore loss {a:.4f} vs SDPA {b:.4f}"
