"""The varlen functions (flash_attn_varlen_func and its packed variants): packed sequences of
different lengths, alone and with causal, GQA, the window, softcap and ALiBi, forward, LSE and
gradients against the float64 reference run sequence by sequence (reference.py) under
FlashAttention's rule; empty sequences; return_attn_probs; and the errors bad offsets get."""

import pytest
import torch

import reference
from flashcore import (flash_attn_func, flash_attn_varlen_func, flash_attn_varlen_kvpacked_func,
                       flash_attn_varlen_qkvpacked_func)
from test_options import slopes_for

# (lens_q, lens_k, nheads, nheads_k, headdim, causal, window_size, softcap, alibi)
CASES = [
    pytest.param([37, 1, 130, 64], [37, 1, 130, 64], 4, 4, 64, False, (-1, -1), 0.0, None, id="plain"),
    pytest.param([37, 1, 130, 64], [37, 1, 130, 64], 4, 2, 64, True, (-1, -1), 0.0, None, id="causal-gqa"),
    pytest.param([20, 90, 3], [50, 40, 129], 4, 1, 32, True, (-1, -1), 0.0, None, id="causal-mqa-sq!=sk"),
    pytest.param([70, 0, 33, 5], [70, 12, 0, 200], 2, 2, 64, False, (-1, -1), 0.0, None, id="empty-sequences"),
    pytest.param([100, 65, 17], [100, 80, 17], 4, 2, 64, True, (24, -1), 0.0, None, id="window-causal-gqa"),
    pytest.param([60, 129], [90, 129], 2, 2, 40, False, (10, 5), 2.0, "batch", id="all-hdim40"),
    pytest.param([150, 31, 77], [150, 45, 60], 6, 2, 128, True, (40, -1), 1.5, "heads", id="all-causal-gqa"),
]


def cu_seqlens(lens, device):
    offsets = [0]
    for n in lens:
        offsets.append(offsets[-1] + n)
    return torch.tensor(offsets, dtype=torch.int32, device=device)


def per_sequence_reference(q, k, v, dout, lens_q, lens_k, upcast, **kwargs):
    """out, lse (nheads, total_q) and (dq, dk, dv) of the reference, one sequence at a time, packed
    back; sequences without keys give out 0, LSE -inf and zero gradients."""
    alibi = kwargs.pop("alibi_slopes")
    leaves = [(t.detach().double() if upcast else t.detach().clone()).requires_grad_() for t in (q, k, v)]
    outs, lses = [], []
    cq = ck = 0
    for b, (nq, nk) in enumerate(zip(lens_q, lens_k)):
        if nq and nk:
            slopes = None if alibi is None else (alibi if alibi.dim() == 1 else alibi[b])
            out, lse = reference.attention(leaves[0][None, cq:cq + nq], leaves[1][None, ck:ck + nk],
                                           leaves[2][None, ck:ck + nk], upcast=upcast, alibi_slopes=slopes, **kwargs)
            outs.append(out[0])
            lses.append(lse[0])
        elif nq:
            outs.append(leaves[0][cq:cq + nq] * 0)
            lses.append(torch.full((q.shape[1], nq), float("-inf"), dtype=torch.float64, device=q.device))
        cq, ck = cq + nq, ck + nk
    out = torch.cat(outs)
    grads = torch.autograd.grad(out, leaves, dout.to(out.dtype), allow_unused=True)
    grads = [torch.zeros_like(t) if g is None else g for g, t in zip(grads, leaves)]
    return out, torch.cat(lses, dim=1), grads


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("lens_q,lens_k,nheads,nheads_k,headdim,causal,window_size,softcap,alibi", CASES)
def test_varlen_forward_lse_and_gradients(device, dtype, lens_q, lens_k, nheads, nheads_k, headdim, causal,
                                          window_size, softcap, alibi):
    total_q, total_k = sum(lens_q), sum(lens_k)
    make = lambda *shape: torch.randn(*shape, dtype=dtype, device=device).requires_grad_()
    q, k, v = make(total_q, nheads, headdim), make(total_k, nheads_k, headdim), make(total_k, nheads_k, headdim)
    slopes = slopes_for(alibi, len(lens_q), nheads, device)
    out, lse, s_dmask = flash_attn_varlen_func(
        q, k, v, cu_seqlens(lens_q, device), cu_seqlens(lens_k, device), max(lens_q), max(lens_k), causal=causal,
        window_size=window_size, softcap=softcap, alibi_slopes=slopes, return_attn_probs=True)
    assert s_dmask is None
    assert lse.shape == (nheads, total_q) and lse.dtype == torch.float32
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    kwargs = dict(causal=causal, window_size=window_size, softcap=softcap, alibi_slopes=slopes)
    out64, lse64, grads64 = per_sequence_reference(q, k, v, dout, lens_q, lens_k, True, **dict(kwargs))
    out_plain, lse_plain, grads_plain = per_sequence_reference(q, k, v, dout, lens_q, lens_k, False, **dict(kwargs))
    reference.assert_accurate("out", out, out64, out_plain, reference.FORWARD_FACTOR)
    finite = torch.isfinite(lse64)
    assert torch.equal(torch.isfinite(lse), finite), "lse: -inf exactly for the rows that see no key"
    reference.assert_accurate("lse", lse[finite], lse64[finite], lse_plain[finite].float(), reference.FORWARD_FACTOR)
    for name, got, want, plain in zip(("dq", "dk", "dv"), grads, grads64, grads_plain):
        reference.assert_accurate(name, got, want, plain, reference.GRADIENT_FACTOR)


def test_varlen_matches_dense_for_equal_lengths(device):
    """Equal lengths: the varlen call is the dense one on reshaped tensors, bit for bit, LSE and
    gradients included (head dims 64 and 59: the latter runs on staged copies), and so are the
    packed variants."""
    batch, seqlen, nheads = 3, 50, 4
    cu = cu_seqlens([seqlen] * batch, device)
    for headdim in (64, 59):
        flat = lambda t: t.reshape(batch * seqlen, nheads, headdim)
        q, k, v = (torch.randn(batch, seqlen, nheads, headdim, dtype=torch.bfloat16, device=device,
                               requires_grad=True) for _ in range(3))
        # deterministic: the GPU's dQ atomics would otherwise add in a different order each run
        dense, dense_lse, _ = flash_attn_func(q, k, v, causal=True, deterministic=True, return_attn_probs=True)
        packed, packed_lse, _ = flash_attn_varlen_func(flat(q), flat(k), flat(v), cu, cu, seqlen, seqlen, causal=True,
                                                       deterministic=True, return_attn_probs=True)
        assert torch.equal(packed, flat(dense))
        assert torch.equal(packed_lse, dense_lse.permute(1, 0, 2).reshape(nheads, batch * seqlen))
        dout = torch.randn_like(dense)
        grads_dense = torch.autograd.grad(dense, (q, k, v), dout)
        grads_packed = torch.autograd.grad(packed, (q, k, v), flat(dout))
        for g_dense, g_packed in zip(grads_dense, grads_packed):
            assert torch.equal(g_dense, g_packed)
        q, k, v = (flat(t.detach()) for t in (q, k, v))
        kv = torch.stack((k, v), dim=1)
        assert torch.equal(flash_attn_varlen_kvpacked_func(q, kv, cu, cu, seqlen, seqlen, causal=True), packed)
        qkv = torch.stack((q, k, v), dim=1)
        assert torch.equal(flash_attn_varlen_qkvpacked_func(qkv, cu, seqlen, causal=True), packed)


@pytest.mark.parametrize("offsets,max_q,match", [
    ([0, 10, 5, 20], 20, "cu_seqlens_q: must not decrease"),
    ([1, 10, 15, 20], 20, "cu_seqlens_q: must start at 0"),
    ([0, 10, 15, 19], 20, "cu_seqlens_q: must end at"),
    ([0, 10, 15, 20], 6, "cu_seqlens_q: sequence 0 has length 10, above max_seqlen_q"),
    ([0, 10, 15, 20], 0, "max_seqlen_q: must be at least 1"),
])
def test_bad_offsets_name_the_argument(offsets, max_q, match):
    q = torch.randn(20, 2, 32, dtype=torch.float16)
    cu_q = torch.tensor(offsets, dtype=torch.int32)
    cu_k = torch.tensor([0, 10, 15, 20], dtype=torch.int32)
    with pytest.raises(ValueError, match=match):
        flash_attn_varlen_func(q, q, q, cu_q, cu_k, max_q, 20)


def test_bad_cu_seqlens_tensors_name_the_argument():
    q = torch.randn(20, 2, 32, dtype=torch.float16)
    cu = torch.tensor([0, 10, 20], dtype=torch.int32)
    with pytest.raises(ValueError, match="cu_seqlens_k: expected dtype torch.int32"):
        flash_attn_varlen_func(q, q, q, cu, cu.long(), 10, 10)
    with pytest.raises(ValueError, match=r"cu_seqlens_k: expected shape \(3\)"):
        flash_attn_varlen_func(q, q, q, cu, torch.tensor([0, 20], dtype=torch.int32), 10, 20)
    with pytest.raises(ValueError, match="q: expected a rank-3 tensor"):
        flash_attn_varlen_func(q[None], q, q, cu, cu, 10, 10)
    with pytest.raises(ValueError, match=r"k: expected a rank-4 tensor \(num_blocks"):  # block_table: pages
        flash_attn_varlen_func(q, q, q, cu, cu, 10, 10, block_table=cu)


def paged(k, v, lens_k, page_size, g):
    """k, v packed (total_k, nheads_k, headdim) spread over shuffled pages (with spare ones):
    (k_pages, v_pages, block_table) such that sequence b's key j is slot j % page_size of page
    block_table[b, j // page_size]."""
    max_pages = max((n + page_size - 1) // page_size for n in lens_k) + 1
    num_pages = len(lens_k) * max_pages + 2
    order = torch.randperm(num_pages, generator=g)
    table = order[: len(lens_k) * max_pages].view(len(lens_k), max_pages).int()
    k_pages = torch.randn(num_pages, page_size, *k.shape[1:], generator=g).to(k.dtype)
    v_pages = torch.randn(num_pages, page_size, *v.shape[1:], generator=g).to(v.dtype)
    start = 0
    for b, n in enumerate(lens_k):
        for j in range(n):
            page, slot = table[b, j // page_size].item(), j % page_size
            k_pages[page, slot], v_pages[page, slot] = k[start + j], v[start + j]
        start += n
    return k_pages, v_pages, table


# (lens_q, lens_k, nheads, nheads_k, headdim, page_size, causal, window_size)
PAGED_CASES = [
    pytest.param([5, 3, 64], [37, 0, 70], 4, 2, 64, 16, False, (-1, -1), id="pages16-empty-gqa"),
    pytest.param([1, 1, 1], [9, 300, 1], 4, 1, 59, 256, True, (-1, -1), id="pages256-decode-hdim59"),
    pytest.param([30, 12], [20, 33], 2, 2, 40, 7, True, (8, -1), id="pages7-window-hdim40"),
]


@pytest.mark.parametrize("lens_q,lens_k,nheads,nheads_k,headdim,page_size,causal,window_size", PAGED_CASES)
def test_paged_varlen_equals_the_packed_call(device, lens_q, lens_k, nheads, nheads_k, headdim, page_size, causal,
                                             window_size):
    """flash_attn_varlen_func with block_table (paged k and v) gives what the same call gives on the
    packed keys the pages hold: exactly on the CPU (the same computation on the same values)."""
    g = torch.Generator().manual_seed(3)
    dtype = torch.bfloat16
    q = torch.randn(sum(lens_q), nheads, headdim, generator=g).to(dtype)
    k = torch.randn(sum(lens_k), nheads_k, headdim, generator=g).to(dtype)
    v = torch.randn(sum(lens_k), nheads_k, headdim, generator=g).to(dtype)
    k_pages, v_pages, table = paged(k, v, lens_k, page_size, g)
    to = lambda t: t.to(device)
    args = (to(cu_seqlens(lens_q, "cpu")), to(cu_seqlens(lens_k, "cpu")), max(lens_q), max(lens_k))
    kw = dict(causal=causal, window_size=window_size, return_attn_probs=True)
    out, lse, _ = flash_attn_varlen_func(to(q), to(k_pages), to(v_pages), *args, block_table=to(table), **kw)
    want, want_lse, _ = flash_attn_varlen_func(to(q), to(k), to(v), *args, **kw)
    if device == "cpu":
        assert torch.equal(out, want) and torch.equal(lse, want_lse)
    else:
        torch.testing.assert_close(out, want)
        torch.testing.assert_close(lse, want_lse)


def test_paged_varlen_is_forward_only_and_checks_block_table(device):
    q = torch.randn(4, 2, 32, device=device, dtype=torch.float16, requires_grad=True)
    pages = torch.randn(3, 16, 2, 32, device=device, dtype=torch.float16)
    cu = torch.tensor([0, 2, 4], dtype=torch.int32, device=device)
    table = torch.tensor([[2], [0]], dtype=torch.int32, device=device)
    out = flash_attn_varlen_func(q, pages, pages, cu, cu, 2, 2, block_table=table)
    with pytest.raises(NotImplementedError, match="block_table"):
        out.sum().backward()
    with pytest.raises(ValueError, match="block_table: expected dtype torch.int32"):
        flash_attn_varlen_func(q, pages, pages, cu, cu, 2, 2, block_table=table.long())
    with pytest.raises(RuntimeError, match="max_seqlen_k: must be in"):  # 1 page of 16 per sequence
        flash_attn_varlen_func(q, pages, pages, cu, cu, 2, 17, block_table=table)
    with pytest.raises(ValueError, match=r"k: expected a rank-4 tensor \(num_blocks"):
        flash_attn_varlen_func(q, pages[0], pages[0], cu, cu, 2, 2, block_table=table)
