"""window_size, softcap and alibi_slopes: each alone and combined (with GQA, causal and
seqlen_q != seqlen_k), forward and gradients against the float64 reference (reference.py, which
writes flash_attn's own definitions) under FlashAttention's rule; the packed variants; the LSE;
torch.compile; and the errors bad values get."""

import math

import pytest
import torch

import reference
from flashcore import flash_attn_func, flash_attn_kvpacked_func, flash_attn_qkvpacked_func
from test_attention import gradients, random_inputs

# (batch, seqlen_q, seqlen_k, nheads, nheads_k, headdim, causal, window_size, softcap, alibi)
# alibi: None, "heads" for (nheads,) slopes, "batch" for (batch, nheads) slopes.
CASES = [
    pytest.param(2, 70, 70, 4, 4, 64, False, (16, 16), 0.0, None, id="window-symmetric"),
    pytest.param(1, 90, 60, 4, 2, 32, True, (20, -1), 0.0, None, id="window-causal-gqa-sq>sk"),
    pytest.param(1, 40, 100, 2, 2, 64, False, (-1, 8), 0.0, None, id="window-right-sq<sk"),
    pytest.param(1, 80, 30, 2, 1, 32, False, (5, 2), 0.0, None, id="window-empty-rows-mqa"),
    pytest.param(2, 50, 50, 4, 4, 64, False, (-1, -1), 2.0, None, id="softcap"),
    pytest.param(1, 50, 70, 4, 2, 64, True, (-1, -1), 1.0, None, id="softcap-causal-gqa"),
    pytest.param(2, 45, 60, 4, 4, 32, False, (-1, -1), 0.0, "heads", id="alibi"),
    pytest.param(2, 60, 45, 4, 2, 32, True, (-1, -1), 0.0, "batch", id="alibi-batch-causal-gqa"),
    pytest.param(2, 77, 90, 6, 2, 64, False, (24, 4), 3.0, "batch", id="all-gqa"),
    pytest.param(1, 90, 77, 4, 1, 40, True, (30, -1), 1.5, "heads", id="all-causal-mqa-hdim40"),
]


def slopes_for(alibi, batch, nheads, device):
    """flash_attn's tests draw slopes as torch.rand(...) * 0.3."""
    if alibi is None:
        return None
    shape = (nheads,) if alibi == "heads" else (batch, nheads)
    return torch.rand(*shape, device=device, dtype=torch.float32) * 0.3


def check_options(q, k, v, out, grads, dout, causal, window_size, softcap, alibi_slopes):
    leaves64 = [t.detach().double().requires_grad_() for t in (q, k, v)]
    leaves_plain = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    kwargs = dict(causal=causal, window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes)
    out64, _ = reference.attention(*leaves64, **kwargs)
    out_plain, _ = reference.attention(*leaves_plain, upcast=False, **kwargs)
    reference.assert_accurate("out", out, out64, out_plain, reference.FORWARD_FACTOR)
    grads64 = gradients(out64, leaves64, dout.double())
    grads_plain = gradients(out_plain, leaves_plain, dout)
    for name, got, want, plain in zip(("dq", "dk", "dv"), grads, grads64, grads_plain):
        reference.assert_accurate(name, got, want, plain, reference.GRADIENT_FACTOR)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("batch,seqlen_q,seqlen_k,nheads,nheads_k,headdim,causal,window_size,softcap,alibi", CASES)
def test_options_forward_and_gradients(device, dtype, batch, seqlen_q, seqlen_k, nheads, nheads_k, headdim, causal,
                                       window_size, softcap, alibi):
    q, k, v = random_inputs(batch, seqlen_q, seqlen_k, nheads, nheads_k, headdim, dtype, device)
    slopes = slopes_for(alibi, batch, nheads, device)
    out = flash_attn_func(q, k, v, causal=causal, window_size=window_size, softcap=softcap, alibi_slopes=slopes)
    dout = torch.randn_like(out)
    check_options(q, k, v, out, gradients(out, (q, k, v), dout), dout, causal, window_size, softcap, slopes)


def test_window_is_a_mask(device):
    """A window that excludes keys changes the output; one wider than both sequences does not."""
    q, k, v = random_inputs(1, 40, 40, 2, 2, 32, torch.float16, device, requires_grad=False)
    plain = flash_attn_func(q, k, v)
    assert torch.equal(flash_attn_func(q, k, v, window_size=(100, 100)), plain)
    assert not torch.equal(flash_attn_func(q, k, v, window_size=(4, 4)), plain)
    assert torch.equal(flash_attn_func(q, k, v, window_size=(-1, 0)), flash_attn_func(q, k, v, causal=True))
    # causal sets the right bound to 0 whatever window_size says, as flash_attn does
    assert torch.equal(flash_attn_func(q, k, v, causal=True, window_size=(6, 9)),
                       flash_attn_func(q, k, v, window_size=(6, 0)))


def test_packed_variants_take_the_options(device):
    qkv = torch.randn(2, 33, 3, 4, 64, dtype=torch.bfloat16, device=device, requires_grad=True)
    slopes = slopes_for("heads", 2, 4, device)
    kwargs = dict(window_size=(8, 2), softcap=4.0, alibi_slopes=slopes)
    out = flash_attn_qkvpacked_func(qkv, **kwargs)
    dout = torch.randn_like(out)
    (dqkv,) = torch.autograd.grad(out, qkv, dout)
    q, k, v = qkv.unbind(dim=2)
    check_options(q, k, v, out, dqkv.unbind(dim=2), dout, False, (8, 2), 4.0, slopes)
    kv = qkv[:, :, 1:].detach()
    assert torch.equal(flash_attn_kvpacked_func(q.detach(), kv, **kwargs), out.detach())


def test_lse_with_options(device):
    """The LSE of the scores the softmax saw (capped, biased, windowed); -inf for rows seeing no key."""
    q, k, v = random_inputs(1, 40, 20, 2, 2, 32, torch.float16, device, requires_grad=False)
    slopes = slopes_for("heads", 1, 2, device)
    out, lse = torch.ops.flashcore.attention_forward(q, k, v, 32 ** -0.5, False, False, 3, 1, 2.0, slopes)
    _, lse64 = reference.attention(q, k, v, window_size=(3, 1), softcap=2.0, alibi_slopes=slopes)
    blind = torch.isinf(lse64)
    assert blind.any(), "the case must contain rows that see no key"
    assert torch.equal(torch.isneginf(lse), blind)
    torch.testing.assert_close(lse[~blind].double(), lse64[~blind], atol=1e-3, rtol=1e-3)


def test_compiled_with_options_matches_eager(device):
    torch._dynamo.reset()
    slopes = slopes_for("heads", 2, 4, device)

    def f(q, k, v):
        return flash_attn_func(q, k, v, causal=True, window_size=(8, -1), softcap=5.0, alibi_slopes=slopes)

    q, k, v = random_inputs(2, 24, 24, 4, 2, 32, torch.bfloat16, device)
    eager = f(q, k, v)
    eager_grads = gradients(eager, (q, k, v), torch.ones_like(eager))
    compiled = torch.compile(f, fullgraph=True)(q, k, v)
    compiled_grads = gradients(compiled, (q, k, v), torch.ones_like(compiled))
    torch.testing.assert_close(compiled, eager)
    for got, want in zip(compiled_grads, eager_grads):
        torch.testing.assert_close(got, want)


def test_opcheck_with_options(device):
    q, k, v = random_inputs(1, 16, 16, 2, 2, 32, torch.float16, device)
    slopes = slopes_for("batch", 1, 2, device)
    args = (q, k, v, 0.2, False, False, 4, 2, 3.0, slopes)
    torch.library.opcheck(torch.ops.flashcore.attention_forward.default, args)
    out, lse = torch.ops.flashcore.attention_forward(*(a.detach() if torch.is_tensor(a) else a for a in args))
    torch.library.opcheck(torch.ops.flashcore.attention_backward.default,
                          (torch.randn_like(out), q.detach(), k.detach(), v.detach(), out, lse, 0.2, False, False, 4,
                           2, 3.0, slopes))


# --- errors -------------------------------------------------------------------------------------

def small(device="cpu"):
    return random_inputs(2, 8, 8, 4, 4, 32, torch.float16, device, requires_grad=False)


@pytest.mark.parametrize("window_size,match", [
    ((-2, -1), "window_size"),
    ((4, -3), "window_size"),
])
def test_bad_window_values_name_window_size(window_size, match):
    q, k, v = small()
    with pytest.raises(ValueError, match=match):
        flash_attn_func(q, k, v, window_size=window_size)


@pytest.mark.parametrize("softcap,error", [
    (math.nan, ValueError),
    (-1.0, ValueError),
    (math.inf, ValueError),
    ("2", TypeError),
    (None, TypeError),
])
def test_bad_softcap_names_softcap(softcap, error):
    q, k, v = small()
    with pytest.raises(error, match="softcap"):
        flash_attn_func(q, k, v, softcap=softcap)


@pytest.mark.parametrize("slopes,error", [
    (torch.ones(3), ValueError),                         # wrong nheads
    (torch.ones(3, 4), ValueError),                      # wrong batch
    (torch.ones(2, 2, 4), ValueError),                   # rank 3
    (torch.ones(4, dtype=torch.float64), ValueError),    # dtype
    (torch.ones(4, dtype=torch.float16), ValueError),
    ([0.1] * 4, TypeError),                              # not a tensor
    (torch.ones(8)[::2], ValueError),                    # not contiguous
])
def test_bad_alibi_slopes_name_alibi_slopes(slopes, error):
    q, k, v = small()
    with pytest.raises(error, match="alibi_slopes"):
        flash_attn_func(q, k, v, alibi_slopes=slopes)


def test_rejected_options_write_nothing_and_leave_grads_alone():
    q, k, v = random_inputs(2, 8, 8, 4, 4, 32, torch.float16, "cpu")
    with pytest.raises(ValueError, match="softcap"):
        flash_attn_func(q, k, v, softcap=-2.0)
    assert q.grad is None and k.grad is None and v.grad is None
