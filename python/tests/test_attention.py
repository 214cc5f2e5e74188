"""flashcore's forward and gradients against the float64 reference, under FlashAttention's rule:
plain attention, GQA/MQA, causal with seqlen_q < seqlen_k and seqlen_q > seqlen_k, ragged sizes,
the packed variants, strided inputs, determinism and the LSE."""

import pytest
import torch

import reference
from flashcore import flash_attn_func, flash_attn_kvpacked_func, flash_attn_qkvpacked_func

DTYPES = [torch.float16, torch.bfloat16]

# (batch, seqlen_q, seqlen_k, nheads, nheads_k, headdim, causal): ragged sizes on purpose.
SHAPES = [
    pytest.param(2, 37, 53, 4, 4, 64, False, id="mha"),
    pytest.param(2, 37, 53, 4, 4, 64, True, id="causal-sq<sk"),
    pytest.param(1, 61, 29, 4, 2, 32, True, id="causal-sq>sk-gqa"),  # rows that see no key at all
    pytest.param(2, 64, 64, 6, 2, 40, True, id="causal-square-gqa-hdim40"),
    pytest.param(1, 1, 77, 8, 1, 128, False, id="mqa-one-query"),
    pytest.param(1, 45, 45, 2, 2, 256, True, id="causal-hdim256"),
]


def random_inputs(batch, seqlen_q, seqlen_k, nheads, nheads_k, headdim, dtype, device, requires_grad=True):
    make = lambda *shape: torch.randn(*shape, dtype=dtype, device=device).requires_grad_(requires_grad)
    return (make(batch, seqlen_q, nheads, headdim), make(batch, seqlen_k, nheads_k, headdim),
            make(batch, seqlen_k, nheads_k, headdim))


def gradients(out, inputs, dout):
    return torch.autograd.grad(out, inputs, dout)


def check_against_reference(q, k, v, out, grads, dout, causal, softmax_scale=None):
    """out and grads (dq, dk, dv) of flashcore vs the float64 reference, with the plain
    same-precision implementation setting the tolerance."""
    leaves64 = [t.detach().double().requires_grad_() for t in (q, k, v)]
    leaves_plain = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out64, _ = reference.attention(*leaves64, causal=causal, softmax_scale=softmax_scale)
    out_plain, _ = reference.attention(*leaves_plain, causal=causal, softmax_scale=softmax_scale, upcast=False)
    reference.assert_accurate("out", out, out64, out_plain, reference.FORWARD_FACTOR)
    grads64 = gradients(out64, leaves64, dout.double())
    grads_plain = gradients(out_plain, leaves_plain, dout)
    for name, got, want, plain in zip(("dq", "dk", "dv"), grads, grads64, grads_plain):
        reference.assert_accurate(name, got, want, plain, reference.GRADIENT_FACTOR)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("batch,seqlen_q,seqlen_k,nheads,nheads_k,headdim,causal", SHAPES)
def test_forward_and_gradients(device, dtype, batch, seqlen_q, seqlen_k, nheads, nheads_k, headdim, causal):
    q, k, v = random_inputs(batch, seqlen_q, seqlen_k, nheads, nheads_k, headdim, dtype, device)
    out = flash_attn_func(q, k, v, causal=causal)
    assert out.shape == q.shape and out.dtype == dtype and out.device == q.device
    assert out.is_contiguous()
    dout = torch.randn_like(out)
    check_against_reference(q, k, v, out, gradients(out, (q, k, v), dout), dout, causal)


def test_explicit_softmax_scale(device):
    q, k, v = random_inputs(2, 19, 23, 2, 1, 64, torch.float16, device)
    out = flash_attn_func(q, k, v, softmax_scale=0.3, causal=True)
    dout = torch.randn_like(out)
    check_against_reference(q, k, v, out, gradients(out, (q, k, v), dout), dout, True, softmax_scale=0.3)


def test_loss_backward_fills_grad(device):
    """The usual training call: loss.backward() puts the library's gradients in .grad."""
    q, k, v = random_inputs(1, 16, 16, 2, 2, 32, torch.bfloat16, device)
    flash_attn_func(q, k, v, causal=True).float().square().mean().backward()
    for t in (q, k, v):
        assert t.grad is not None and t.grad.shape == t.shape and torch.isfinite(t.grad).all()


def test_strided_inputs(device):
    """Inputs in (batch, nheads, seqlen, headdim) memory order, transposed to flash_attn's layout:
    accepted without a copy since headdim stays contiguous."""
    q, k, v = (torch.randn(2, 3, 21, 64, dtype=torch.float16, device=device).transpose(1, 2).requires_grad_()
               for _ in range(3))
    assert not q.is_contiguous()
    out = flash_attn_func(q, k, v, causal=True)
    dout = torch.randn_like(out)
    check_against_reference(q, k, v, out, gradients(out, (q, k, v), dout), dout, True)


@pytest.mark.parametrize("causal", [False, True])
def test_qkvpacked(device, causal):
    qkv = torch.randn(2, 33, 3, 4, 64, dtype=torch.float16, device=device, requires_grad=True)
    out = flash_attn_qkvpacked_func(qkv, causal=causal)
    dout = torch.randn_like(out)
    (dqkv,) = torch.autograd.grad(out, qkv, dout)
    assert dqkv.shape == qkv.shape
    q, k, v = qkv.unbind(dim=2)
    check_against_reference(q, k, v, out, dqkv.unbind(dim=2), dout, causal)


@pytest.mark.parametrize("causal", [False, True])
def test_kvpacked_gqa(device, causal):
    q = torch.randn(2, 29, 6, 32, dtype=torch.bfloat16, device=device, requires_grad=True)
    kv = torch.randn(2, 41, 2, 2, 32, dtype=torch.bfloat16, device=device, requires_grad=True)
    out = flash_attn_kvpacked_func(q, kv, causal=causal)
    dout = torch.randn_like(out)
    dq, dkv = torch.autograd.grad(out, (q, kv), dout)
    assert dkv.shape == kv.shape
    k, v = kv.unbind(dim=2)
    check_against_reference(q, k, v, out, (dq, *dkv.unbind(dim=2)), dout, causal)


def test_packed_match_unpacked(device):
    qkv = torch.randn(1, 24, 3, 2, 64, dtype=torch.float16, device=device)
    q, k, v = qkv.unbind(dim=2)
    expected = flash_attn_func(q, k, v, causal=True)
    assert torch.equal(flash_attn_qkvpacked_func(qkv, causal=True), expected)
    assert torch.equal(flash_attn_kvpacked_func(q, qkv[:, :, 1:], causal=True), expected)


def test_deterministic_backward_is_reproducible(device):
    q, k, v = random_inputs(2, 40, 70, 4, 2, 64, torch.float16, device)
    out = flash_attn_func(q, k, v, causal=True, deterministic=True)
    dout = torch.randn_like(out)
    first = gradients(out, (q, k, v), dout)
    out = flash_attn_func(q, k, v, causal=True, deterministic=True)
    second = gradients(out, (q, k, v), dout)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_lse(device):
    """The custom op's second output: the natural-log LSE, -inf for rows that see no key."""
    q, k, v = random_inputs(1, 30, 12, 2, 2, 64, torch.float16, device, requires_grad=False)
    scale = 64 ** -0.5
    out, lse = torch.ops.flashcore.attention_forward(q, k, v, scale, True, False)
    _, lse64 = reference.attention(q, k, v, causal=True)
    assert lse.shape == (1, 2, 30) and lse.dtype == torch.float32
    blind = torch.isinf(lse64)
    assert blind.any(), "the case must contain rows that see no key"
    assert torch.equal(torch.isneginf(lse), blind)
    assert (out[:, :18] == 0).all(), "rows that see no key give 0"
    torch.testing.assert_close(lse[~blind].double(), lse64[~blind], atol=1e-4, rtol=1e-4)


def test_no_grad_inference(device):
    q, k, v = random_inputs(1, 8, 8, 2, 2, 32, torch.float16, device, requires_grad=False)
    with torch.inference_mode():
        out = flash_attn_func(q, k, v)
    assert torch.isfinite(out).all()
