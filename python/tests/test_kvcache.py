"""flash_attn_with_kvcache against a float64 reference written here in plain PyTorch (rotary in
float64, the append done by hand, attention by tests/reference.py), on the CPU and on CUDA:
contiguous and paged caches (page sizes 1, 16, 256), GQA, rotary both ways, causal with
seqlen_q > 1, left padding, cache_batch_idx, window, softcap, ALiBi, forced splits; the cache after
the append; flash_attn's return values; errors naming the argument with nothing written."""

import pytest
import torch

import flashcore
from reference import FORWARD_FACTOR, assert_accurate, attention


def rotate(x, cos, sin, positions, interleaved):
    """x (seqlen, nheads, headdim) float64 rotated at `positions` (seqlen,)."""
    rd = cos.shape[1] * 2
    c = cos.double()[positions][:, None, :]
    s = sin.double()[positions][:, None, :]
    x = x.clone()
    if interleaved:
        a, b = x[..., 0:rd:2].clone(), x[..., 1:rd:2].clone()
        x[..., 0:rd:2] = a * c - b * s
        x[..., 1:rd:2] = a * s + b * c
    else:
        a, b = x[..., : rd // 2].clone(), x[..., rd // 2: rd].clone()
        x[..., : rd // 2] = a * c - b * s
        x[..., rd // 2: rd] = a * s + b * c
    return x


CASES = [
    # batch, sq, hq, hkv, d, capacity, page, new, rotary (0/1 interleaved/2 halves), causal, window, softcap, alibi, leftpad, batch_idx, splits
    dict(name="decode_gqa", batch=3, sq=1, hq=8, hkv=2, d=64, cap=120, page=0, new=1),
    dict(name="paged16_rotary", batch=3, sq=1, hq=8, hkv=2, d=128, cap=96, page=16, new=1, rotary=1),
    dict(name="paged1_halves", batch=2, sq=1, hq=4, hkv=1, d=64, cap=40, page=1, new=2, rotary=2, causal=True),
    dict(name="paged256", batch=2, sq=1, hq=4, hkv=2, d=64, cap=512, page=256, new=1),
    dict(name="speculative", batch=2, sq=4, hq=8, hkv=2, d=64, cap=100, page=16, new=4, rotary=2, causal=True),
    dict(name="leftpad_batch_idx", batch=3, sq=1, hq=4, hkv=2, d=64, cap=80, page=0, new=1, leftpad=True, batch_idx=True),
    dict(name="options", batch=2, sq=2, hq=4, hkv=2, d=64, cap=128, page=16, new=2, causal=True, window=(40, -1),
         softcap=1.5, alibi=True, splits=3),
    # head dims that are not a multiple of 8: CUDA runs them on padded copies (kvcache_staging.cu)
    dict(name="hdim59_rotary_leftpad_batch_idx", batch=3, sq=1, hq=6, hkv=2, d=59, cap=70, page=0, new=1, rotary=1,
         leftpad=True, batch_idx=True),
    dict(name="hdim40_paged_speculative", batch=2, sq=2, hq=4, hkv=1, d=40, cap=64, page=16, new=2, rotary=2,
         causal=True, splits=2),
    dict(name="hdim59_paged256_no_append", batch=2, sq=1, hq=4, hkv=4, d=59, cap=300, page=256, new=0),
]


def run_case(case, dtype, device):
    g = torch.Generator().manual_seed(1)
    b, sq, hq, hkv, d, cap, page, new = (case[k] for k in ("batch", "sq", "hq", "hkv", "d", "cap", "page", "new"))
    q = torch.randn(b, sq, hq, d, generator=g).to(dtype)
    if page:
        pages_per_seq = (cap + page - 1) // page
        cap = pages_per_seq * page
        num_pages = b * pages_per_seq + 2
        k_cache = torch.randn(num_pages, page, hkv, d, generator=g).to(dtype)
        block_table = torch.randperm(num_pages, generator=g)[: b * pages_per_seq].view(b, pages_per_seq).int()
        batch_idx = None
    else:
        rows = b + (2 if case.get("batch_idx") else 0)
        k_cache = torch.randn(rows, cap, hkv, d, generator=g).to(dtype)
        block_table = None
        batch_idx = torch.randperm(rows, generator=g)[:b].int() if case.get("batch_idx") else None
    v_cache = torch.randn(k_cache.shape, generator=g).to(dtype)
    k = torch.randn(b, new, hkv, d, generator=g).to(dtype) if new else None
    v = torch.randn(b, new, hkv, d, generator=g).to(dtype) if new else None
    seqlens = torch.randint(0, cap - new + 1, (b,), generator=g).int()
    seqlens[0] = cap - new
    leftpad = (torch.rand(b, generator=g) * (seqlens.double() + 1)).floor().int() if case.get("leftpad") else None
    cos = sin = None
    if case.get("rotary"):
        angle = torch.arange(cap).double()[:, None] * 10000.0 ** (-torch.arange(d // 2).double() * 2 / d)
        cos, sin = angle.cos().to(dtype), angle.sin().to(dtype)
    slopes = torch.rand(hq, generator=g) * 0.3 if case.get("alibi") else None
    window = case.get("window", (-1, -1))
    causal = case.get("causal", False)
    interleaved = case.get("rotary") == 1
    k_before, v_before = k_cache.clone(), v_cache.clone()

    to = lambda t: None if t is None else t.to(device)
    kc, vc = to(k_cache), to(v_cache)
    out, lse = flashcore.flash_attn_with_kvcache(
        to(q), kc, vc, to(k), to(v), to(cos), to(sin), to(seqlens), to(batch_idx), to(leftpad), to(block_table),
        causal=causal, window_size=window, softcap=case.get("softcap", 0.0), rotary_interleaved=interleaved,
        alibi_slopes=to(slopes), num_splits=case.get("splits", 0), return_softmax_lse=True)
    out, lse, kc, vc = out.cpu(), lse.cpu(), kc.cpu(), vc.cpu()

    def slot(bi, pos):
        if block_table is not None:
            return block_table[bi, pos // page].item(), pos % page
        return (batch_idx[bi].item() if batch_idx is not None else bi), pos

    k_want, v_want = k_before.clone(), v_before.clone()
    for bi in range(b):
        L = seqlens[bi].item()
        P = leftpad[bi].item() if leftpad is not None else 0
        positions = torch.arange(L, L + new)
        k_rot = rotate(k[bi].double(), cos, sin, positions, interleaved) if cos is not None else (
            k[bi].double() if new else None)
        q_pos = torch.arange(L, L + sq) if (causal or tuple(window) != (-1, -1)) else torch.full((sq,), L)
        q_rot = rotate(q[bi].double(), cos, sin, q_pos, interleaved) if cos is not None else q[bi].double()
        ks, vs = [], []
        for pos in range(P, L + new):
            if pos < L:
                r, s = slot(bi, pos)
                ks.append(k_before[r, s].double())
                vs.append(v_before[r, s].double())
            else:
                ks.append(k_rot[pos - L])
                vs.append(v[bi, pos - L].double())
        for t in range(new):
            r, s = slot(bi, L + t)
            k_want[r, s] = k_rot[t].to(dtype)
            v_want[r, s] = v[bi, t]
        kseq = torch.stack(ks)[None]
        vseq = torch.stack(vs)[None]
        kw = dict(causal=causal, window_size=window, softcap=case.get("softcap", 0.0),
                  alibi_slopes=None if slopes is None else slopes[None])
        ref, ref_lse = attention(q_rot[None], kseq, vseq, **kw)
        plain, _ = attention(q_rot[None].to(dtype), kseq.to(dtype), vseq.to(dtype), upcast=False, **kw)
        assert_accurate(f"out[{bi}]", out[bi:bi + 1], ref, plain, FORWARD_FACTOR)
        torch.testing.assert_close(lse[bi:bi + 1].double(), ref_lse, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(kc.float(), k_want.float(), atol=0, rtol=2 ** -7)  # rotation: 1 ulp
    assert torch.equal(vc, v_want)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_with_kvcache_matches_reference(case, dtype, device):
    run_case(case, dtype, device)


def test_returns_like_flash_attn(device):
    q = torch.randn(1, 1, 4, 64, dtype=torch.float16, device=device)
    kc = torch.randn(1, 32, 4, 64, dtype=torch.float16, device=device)
    out = flashcore.flash_attn_with_kvcache(q, kc, kc.clone(), cache_seqlens=10)
    assert isinstance(out, torch.Tensor) and out.shape == q.shape
    out, lse = flashcore.flash_attn_with_kvcache(q, kc, kc.clone(), cache_seqlens=10, return_softmax_lse=True)
    assert lse.shape == (1, 4, 1) and lse.dtype == torch.float32


def test_bad_block_table_is_refused_and_writes_nothing(device):
    q = torch.randn(2, 1, 4, 64, dtype=torch.bfloat16, device=device)
    kc = torch.randn(6, 16, 2, 64, dtype=torch.bfloat16, device=device)
    vc = torch.randn_like(kc)
    k = torch.randn(2, 1, 2, 64, dtype=torch.bfloat16, device=device)
    table = torch.tensor([[0, 1], [2, 9]], dtype=torch.int32, device=device)
    seqlens = torch.tensor([5, 20], dtype=torch.int32, device=device)
    before = kc.clone()
    with pytest.raises(ValueError, match="block_table"):
        flashcore.flash_attn_with_kvcache(q, kc, vc, k, k.clone(), cache_seqlens=seqlens, block_table=table)
    assert torch.equal(kc, before)
    with pytest.raises(ValueError, match="cache_seqlens"):
        flashcore.flash_attn_with_kvcache(q, kc, vc, k, k.clone(), cache_seqlens=32, block_table=table[:, :2] * 0)
    assert torch.equal(kc, before)
    with pytest.raises(ValueError, match="cache_seqlens"):
        flashcore.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens.long(), block_table=table)


@pytest.mark.parametrize("append", [False, True])
def test_paged_overflow_is_a_runtime_error_naming_block_table(device, append):
    """flash_attn's test_flash_attn_kvcache_paged_block_table_bounds: a sequence past the positions
    block_table maps raises RuntimeError naming block_table (flashcore's ArgumentError is one)."""
    kc = torch.randn(4, 256, 1, 64, dtype=torch.float16, device=device)
    q = torch.randn(1, 1, 1, 64, dtype=torch.float16, device=device)
    table = torch.zeros(1, 1, dtype=torch.int32, device=device)
    k = torch.randn(1, 1, 1, 64, dtype=torch.float16, device=device) if append else None
    seqlens = torch.full((1,), 256 if append else 257, dtype=torch.int32, device=device)
    with pytest.raises(RuntimeError, match="block_table"):
        flashcore.flash_attn_with_kvcache(q, kc, kc.clone(), k, k, cache_seqlens=seqlens, block_table=table)
    out = flashcore.flash_attn_with_kvcache(q, kc, kc.clone(), cache_seqlens=256, block_table=table)
    assert out.shape == q.shape and not out.isnan().any()
