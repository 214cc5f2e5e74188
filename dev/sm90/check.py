"""Correctness of flashcore's sm90 forward against a float64 reference (FlashAttention's rule:
max error <= 2x a same-precision naive implementation's + a rounding floor; NaN never passes).
Writes check.json beside $OUT if set."""
import json
import math
import os
import sys
import time

import torch

import fc_sm90

torch.manual_seed(0)
DEV = "cuda"


def reference(q, k, v, causal, dtype_naive=None):
    """(out (B,Sq,H,D), lse (B,H,Sq)). float64 when dtype_naive is None; otherwise the naive
    same-precision implementation (dtype matmuls, fp32 softmax)."""
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    g = hq // hkv
    scale = 1.0 / math.sqrt(d)
    qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))
    kh = kh.repeat_interleave(g, dim=1)
    vh = vh.repeat_interleave(g, dim=1)
    if dtype_naive is None:
        qh, kh, vh = qh.double(), kh.double(), vh.double()
        s = (qh @ kh.transpose(-1, -2)) * scale
    else:
        s = (qh @ kh.transpose(-1, -2)).float() * scale
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + sk - sq, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None])
    p = torch.nan_to_num(p, nan=0.0)  # rows that see no key
    if dtype_naive is None:
        o = p @ vh
    else:
        o = (p.to(dtype_naive) @ vh).float()
    return o.transpose(1, 2), lse


def make(b, s, h, d, dtype, layout):
    """A (b, s, h, d) tensor in one of several memory layouts."""
    if layout == "bshd":
        return torch.randn(b, s, h, d, device=DEV, dtype=dtype)
    if layout == "bhsd":  # (B, H, S, D) storage viewed as BSHD
        return torch.randn(b, h, s, d, device=DEV, dtype=dtype).transpose(1, 2)
    if layout == "packed":  # one of three in a (B, S, 3, H, D) buffer, padded head dim
        dp = (d + 7) // 8 * 8 + 8
        return torch.randn(b, s, 3, h, dp, device=DEV, dtype=dtype)[:, :, 1, :, :d]
    raise ValueError(layout)


# CHECK_VARIANTS="bf16:128:16,...": non-causal cases of that dtype and head dim run that dev
# variant (kernel_dim 1000 + n), and the causal ones too with CHECK_VARIANTS_CAUSAL=1;
# CHECK_CAUSAL=0/1: only non-causal / causal cases.
VARIANTS = {(x.split(":")[0].replace("bf16", "bfloat16").replace("fp16", "float16"), int(x.split(":")[1])): int(x.split(":")[2])
            for x in os.environ.get("CHECK_VARIANTS", "").split(",") if x}
# CHECK_VARIANTS_CAUSAL=only: the causal cases run the variant, the non-causal ones the library.
VARIANTS_CAUSAL = os.environ.get("CHECK_VARIANTS_CAUSAL") in ("1", "only")
VARIANTS_NONCAUSAL = os.environ.get("CHECK_VARIANTS_CAUSAL") != "only"
CAUSAL = {"0": (False,), "1": (True,)}.get(os.environ.get("CHECK_CAUSAL", ""), (False, True))


def run_case(b, sq, sk, hq, hkv, d, causal, dtype, layout="bshd"):
    q = make(b, sq, hq, d, dtype, layout)
    k = make(b, sk, hkv, d, dtype, layout)
    v = make(b, sk, hkv, d, dtype, layout)
    # Outputs poisoned, inside a larger buffer: rows/columns past the view must stay NaN.
    out_full = torch.full((b, sq + 3, hq, d + 8), float("nan"), device=DEV, dtype=dtype)
    out = out_full[:, :sq, :, :d]
    lse_full = torch.full((b, hq, sq + 5), float("nan"), device=DEV, dtype=torch.float32)
    lse = lse_full[:, :, :sq]
    if VARIANTS:
        wanted = VARIANTS_CAUSAL if causal else VARIANTS_NONCAUSAL
        fc_sm90.VARIANT = VARIANTS.get((str(dtype).split(".")[-1], d), -1) if wanted else -1
    fc_sm90.forward(q, k, v, causal, out=out, lse=lse)
    torch.cuda.synchronize()
    o_ref, lse_ref = reference(q, k, v, causal)
    o_naive, lse_naive = reference(q, k, v, causal, dtype_naive=dtype)
    o = out.double()
    err = (o - o_ref).abs().max().item()
    err_naive = (o_naive.double() - o_ref).abs().max().item()
    r = o_ref.to(dtype)
    floor = 2 * ((r + 0.3 - 0.3) - r).abs().max().item()
    tol = 2 * err_naive + floor
    finite = lse_ref.isfinite()
    lse_err = (lse.double() - lse_ref).masked_fill(~finite, 0).abs().max().item()
    lse_err_naive = (lse_naive.double() - lse_ref).masked_fill(~finite, 0).abs().max().item()
    lse_tol = 2 * lse_err_naive + 1e-4
    lse_inf_ok = bool((lse[~finite] == float("-inf")).all().item())
    nan_inside = bool(torch.isnan(out).any().item() or torch.isnan(lse).any().item())
    pad_ok = bool(torch.isnan(out_full[:, sq:]).all().item() and torch.isnan(out_full[:, :sq, :, d:]).all().item()
                  and torch.isnan(lse_full[:, :, sq:]).all().item())
    ok = (err <= tol) and (lse_err <= lse_tol) and lse_inf_ok and not nan_inside and pad_ok
    return dict(b=b, sq=sq, sk=sk, hq=hq, hkv=hkv, d=d, causal=causal, dtype=str(dtype).split(".")[-1],
                layout=layout, err=err, tol=tol, err_naive=err_naive, lse_err=lse_err, lse_tol=lse_tol,
                lse_inf_ok=lse_inf_ok, nan_inside=nan_inside, pad_ok=pad_ok, ok=ok)


def cases(quick):
    only = os.environ.get("CHECK_DIMS")
    dims = [int(x) for x in only.split(",")] if only else [64, 72, 96, 128, 160, 192, 256]
    seqs = [(1, 1), (17, 17), (1000, 1000), (4097, 4097), (128, 1000), (1000, 128), (17, 4097), (4097, 17),
            (300, 301)]
    dtypes = [dict(bf16=torch.bfloat16, fp16=torch.float16)[x] for x in os.environ.get("CHECK_DTYPES", "bf16,fp16").split(",")]
    for dtype in dtypes:
        for d in dims:
            for sq, sk in seqs:
                if quick and (sq, sk) not in ((17, 17), (1000, 1000), (1000, 128), (128, 1000)):
                    continue
                if d not in (64, 128) and sq * sk > 2_000_000:
                    continue
                for causal in (False, True):
                    yield (1, sq, sk, 2, 2, d, causal, dtype, "bshd")
        for d in [x for x in (64, 128, 256) if x in dims]:
            for causal in (False, True):
                yield (2, 513, 1031, 16, 2, d, causal, dtype, "bshd")    # GQA 8:1
                yield (2, 1031, 513, 4, 1, d, causal, dtype, "bhsd")     # MQA, BHSD strides
                yield (3, 257, 257, 3, 3, d, causal, dtype, "packed")    # packed qkv view
                yield (1, 2048, 2048, 4, 2, d, causal, dtype, "bshd")    # several tiles, persistent loop
        for d in [x for x in (128, 256) if x in dims]:  # > 64 m_blocks: the one-tile-per-CTA causal path
            if not quick:
                yield (1, 8300, 8300, 1, 1, d, True, dtype, "bshd")
        if 64 in dims and not quick:
            # Past the small-problem tile (B*H*ceil(Sq/64) > #SMs): several 192-row tiles per CTA
            # (two Q buffers), ragged keys, the causal grid bottom-aligned (Sq % 192 != 0).
            for causal in (False, True):
                yield (4, 2000, 2100, 8, 2, 64, causal, dtype, "bshd")
            yield (1, 12500, 12500, 1, 1, 64, True, dtype, "bshd")  # > 64 m_blocks: one tile per CTA, offset 172
        if 128 in dims and not quick:
            yield (3, 1100, 900, 8, 2, 128, False, dtype, "bshd")  # short-keys tile, 2 tiles per CTA
        # Non-causal clusters of 2 CTAs sharing K/V (d128/d256): an odd m_block count (the last
        # cluster's second CTA past seqlen_q), GQA, several items per cluster; d128 past 4k keys.
        if 256 in dims and not quick:
            yield (2, 1100, 1300, 8, 2, 256, False, dtype, "bshd")
        if 128 in dims and not quick:
            yield (1, 1500, 5000, 4, 1, 128, False, dtype, "bhsd")
        if 72 in dims:
            yield (2, 1000, 1000, 2, 2, 72, True, dtype, "packed")            # padded head dim in a view


def main():
    quick = "--quick" in sys.argv
    results = []
    t0 = time.time()
    n_fail = 0
    for c in cases(quick):
        if c[6] not in CAUSAL:
            continue
        try:
            r = run_case(*c)
        except Exception as e:  # noqa: BLE001 - report and go on
            r = dict(case=str(c), error=repr(e), ok=False)
        results.append(r)
        if not r["ok"]:
            n_fail += 1
            print("FAIL", r, flush=True)
    worst = max((r["err"] / r["tol"] for r in results if "err" in r and r["tol"] > 0), default=0)
    print(f"{len(results)} cases, {n_fail} failed, worst err/tol {worst:.3f}, {time.time() - t0:.1f}s", flush=True)
    for r in results[:: max(1, len(results) // 12)]:
        print({k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items()})
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, os.environ.get("CHECK_NAME", "check.json")), "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, results=results), f)
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
