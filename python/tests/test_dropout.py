"""dropout_p: forward and gradients against the float64 reference given the library's mask
(flashcore._dropout.keep_mask, the Philox stream of flashcore/attention.h written with torch ops),
alone and with the other options, varlen included; seeds from torch's generator (torch.manual_seed
reproduces a call, the next call draws a new mask); return_attn_probs' S_dmask; bad values."""

import pytest
import torch

import reference
from flashcore import _dropout, flash_attn_func, flash_attn_varlen_func
from test_attention import gradients, random_inputs

# (batch, seqlen_q, seqlen_k, nheads, nheads_k, headdim, causal, window_size, softcap, dropout_p)
CASES = [
    pytest.param(2, 70, 90, 4, 4, 64, False, (-1, -1), 0.0, 0.1, id="p0.1"),
    pytest.param(1, 130, 100, 4, 2, 128, True, (-1, -1), 0.0, 0.3, id="p0.3-causal-gqa-d128"),
    pytest.param(2, 77, 150, 4, 1, 40, True, (30, -1), 1.5, 0.17, id="p0.17-window-softcap-mqa"),
]


def normalize(unnorm, lse, q, k, causal, window_size, softcap):
    """flash_attn's normalize_flash_attn_S with block size 128, on flashcore's LSE: P = unnorm *
    exp(m_t - lse), m_t the running max over key blocks t .. end."""
    scores = torch.einsum("bihd,bjhd->bhij", q.double(),
                          k.double().repeat_interleave(q.shape[2] // k.shape[2], dim=2)) * q.shape[-1] ** -0.5
    if softcap > 0:
        scores = softcap * torch.tanh(scores / softcap)
    masked = reference.local_mask(q.shape[1], k.shape[1], (window_size[0], 0 if causal else window_size[1]), q.device)
    if causal or tuple(window_size) != (-1, -1):
        scores = scores.masked_fill(masked, float("-inf"))
    block_max = torch.stack([blk.amax(dim=-1) for blk in scores.split(128, dim=-1)], dim=-1)
    running = torch.cummax(block_max.flip(-1), dim=-1).values.flip(-1).repeat_interleave(128, dim=-1)
    running = running[..., :k.shape[1]]
    return torch.nan_to_num(unnorm * torch.exp(running - lse.double().unsqueeze(-1)), nan=0.0)


def seeded_call(seed, *args, **kwargs):
    torch.manual_seed(seed)
    return flash_attn_func(*args, **kwargs)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("batch,seqlen_q,seqlen_k,nheads,nheads_k,headdim,causal,window_size,softcap,p", CASES)
def test_dropout_forward_and_gradients(device, dtype, batch, seqlen_q, seqlen_k, nheads, nheads_k, headdim, causal,
                                       window_size, softcap, p):
    q, k, v = random_inputs(batch, seqlen_q, seqlen_k, nheads, nheads_k, headdim, dtype, device)
    out, lse, s_dmask = seeded_call(7, q, k, v, dropout_p=p, causal=causal, window_size=window_size, softcap=softcap,
                                    return_attn_probs=True)
    mask = s_dmask[:, :, :seqlen_q, :seqlen_k] >= 0
    assert s_dmask.shape == (batch, nheads, (seqlen_q + 127) // 128 * 128, (seqlen_k + 127) // 128 * 128)
    # The mask S_dmask carries is the library's: the same seed reproduces out bit for bit.
    again = seeded_call(7, q.detach(), k.detach(), v.detach(), dropout_p=p, causal=causal, window_size=window_size,
                        softcap=softcap)
    assert torch.equal(again, out.detach())
    dout = torch.randn_like(out)
    grads = gradients(out, (q, k, v), dout)
    leaves64 = [t.detach().double().requires_grad_() for t in (q, k, v)]
    leaves_plain = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    kwargs = dict(causal=causal, window_size=window_size, softcap=softcap, dropout_mask=mask, dropout_p=p)
    out64, lse64 = reference.attention(*leaves64, **kwargs)
    out_plain, _ = reference.attention(*leaves_plain, upcast=False, **kwargs)
    reference.assert_accurate("out", out, out64, out_plain, reference.FORWARD_FACTOR)
    grads64 = gradients(out64, leaves64, dout.double())
    grads_plain = gradients(out_plain, leaves_plain, dout)
    for name, got, want, plain in zip(("dq", "dk", "dv"), grads, grads64, grads_plain):
        reference.assert_accurate(name, got, want, plain, reference.GRADIENT_FACTOR)
    # The magnitude is flash_attn's unnormalised P: undone as flash_attn's normalize_flash_attn_S does
    # (running max over key blocks of 128, last to first), each row that sees a key sums to 1.
    probs = normalize(s_dmask[:, :, :seqlen_q, :seqlen_k].abs().double(), lse, q, k, causal, window_size, softcap)
    finite = lse64.isfinite()
    assert torch.allclose(probs.sum(-1)[finite], torch.ones_like(lse64)[finite], atol=2e-2)


def test_dropout_follows_torch_manual_seed(device):
    q, k, v = random_inputs(1, 64, 64, 2, 2, 64, torch.bfloat16, device)
    a = seeded_call(3, q, k, v, dropout_p=0.5)
    b = seeded_call(3, q, k, v, dropout_p=0.5)
    c = flash_attn_func(q, k, v, dropout_p=0.5)  # the generator moved on: a new mask
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    # The keep rate is flash_attn's: (floor(255 * 0.5) + 1) / 256.
    _, _, s_dmask = seeded_call(3, q, k, v, dropout_p=0.5, return_attn_probs=True)
    rate = (s_dmask[:, :, :64, :64] >= 0).double().mean().item()
    assert abs(rate - 128 / 256) < 0.03


def test_dropout_varlen_matches_the_reference_per_sequence(device):
    torch.manual_seed(0)
    lens_q, lens_k = [37, 0, 80], [50, 9, 64]
    nheads, headdim, p = 2, 64, 0.2
    cu_q = torch.tensor([0, 37, 37, 117], dtype=torch.int32, device=device)
    cu_k = torch.tensor([0, 50, 59, 123], dtype=torch.int32, device=device)
    q = torch.randn(117, nheads, headdim, device=device, dtype=torch.bfloat16)
    k = torch.randn(123, nheads, headdim, device=device, dtype=torch.bfloat16)
    v = torch.randn(123, nheads, headdim, device=device, dtype=torch.bfloat16)
    out, _, s_dmask = flash_attn_varlen_func(q, k, v, cu_q, cu_k, 80, 64, dropout_p=p, causal=True,
                                             return_attn_probs=True)
    for b in range(3):
        nq, nk = lens_q[b], lens_k[b]
        if nq == 0:
            continue
        sl_q, sl_k = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_k[b]), int(cu_k[b + 1]))
        mask = s_dmask[b:b + 1, :, :nq, :nk] >= 0
        args = [t[s].unsqueeze(0) for t, s in ((q, sl_q), (k, sl_k), (v, sl_k))]
        out64, _ = reference.attention(*[a.double() for a in args], causal=True, dropout_mask=mask, dropout_p=p)
        out_plain, _ = reference.attention(*args, upcast=False, causal=True, dropout_mask=mask, dropout_p=p)
        reference.assert_accurate(f"out of sequence {b}", out[sl_q].unsqueeze(0), out64, out_plain,
                                  reference.FORWARD_FACTOR)


def test_keep_mask_matches_the_library_mapping():
    # Entry (b, h, i, j) of the torch-drawn mask against a direct evaluation of attention.h's formula.
    mask = _dropout.keep_mask(2, 3, 33, 140, 0.25, 0x1234567890, 9, "cpu")
    x = torch.tensor([(20 // 16) * 8 + 20 % 8], dtype=torch.int64)
    j = 133
    y = torch.tensor([((j // 64) * 4 + (j % 8) // 2) * 2 + (j // 8) % 2], dtype=torch.int64)
    z = torch.tensor([1 * 3 + 2], dtype=torch.int64)
    w = torch.tensor([9], dtype=torch.int64)
    words = _dropout._philox(x, y, z, w, 0x34567890, 0x12)
    byte = (int(words[(j % 64) // 16]) >> (8 * (((20 % 16) // 8) * 2 + j % 2))) & 0xFF
    assert bool(mask[1, 2, 20, j]) == (byte <= int(0.75 * 255))


@pytest.mark.parametrize("bad", [-0.1, 1.0, float("nan")])
def test_bad_dropout_p_names_it(device, bad):
    q, k, v = random_inputs(1, 16, 16, 1, 1, 32, torch.bfloat16, device)
    with pytest.raises(ValueError, match="dropout_p"):
        flash_attn_func(q, k, v, dropout_p=bad)
    with pytest.raises(TypeError, match="dropout_p"):
        flash_attn_func(q, k, v, dropout_p="0.1")
