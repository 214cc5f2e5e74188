"""Correctness of flashcore's sm90 backward against a float64 reference (FlashAttention's rule for
gradients: max error <= 3x a same-precision naive implementation's + a rounding floor; NaN never
passes; outputs poisoned inside larger buffers; floor 2 x the dtype's rounding at magnitude 0.3, as
FlashAttention's tests). Appends a JSON line to $OUT/checks.jsonl if OUT is set.
The forward (O, LSE) comes from the float64 reference, so only the backward is under test."""
import json
import math
import os
import sys
import time

import torch

import fc_sm90_bwd

torch.manual_seed(0)
DEV = "cuda"


def grads(q, k, v, dout, causal, naive_dtype=None):
    """(out, lse, dq, dk, dv) by the explicit backward formulas, so rows that see no key (causal,
    Sq > Sk) give zero gradients without NaN. float64 when naive_dtype is None; otherwise the
    same-precision naive implementation: dtype matmuls, fp32 element-wise math, P and dS rounded
    to dtype before their products."""
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    g = hq // hkv
    scale = 1.0 / math.sqrt(d)
    mm_t = torch.float64 if naive_dtype is None else naive_dtype
    ew_t = torch.float64 if naive_dtype is None else torch.float32
    mm = lambda x, y: (x.to(mm_t) @ y.to(mm_t)).to(ew_t)
    qh, kh, vh, doh = (t.transpose(1, 2) for t in (q, k, v, dout))  # (B, H, S, D)
    kh = kh.repeat_interleave(g, dim=1)
    vh = vh.repeat_interleave(g, dim=1)
    s = mm(qh, kh.transpose(-1, -2)) * scale
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + sk - sq, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    lse_safe = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
    p = torch.exp(s - lse_safe[..., None])  # 0 where masked, all 0 in rows that see no key
    o = mm(p, vh)
    dv = mm(p.transpose(-1, -2), doh)
    dp = mm(doh, vh.transpose(-1, -2))
    dsum = (doh.to(ew_t) * o.to(mm_t).to(ew_t)).sum(-1, keepdim=True)
    ds = p * (dp - dsum)
    dq = mm(ds, kh) * scale
    dk = mm(ds.transpose(-1, -2), qh) * scale
    dk = dk.reshape(b, hkv, g, sk, d).sum(2)
    dv = dv.reshape(b, hkv, g, sk, d).sum(2)
    tr = lambda t: t.transpose(1, 2)
    return tr(o), lse, tr(dq), tr(dk), tr(dv)


def make(b, s, h, d, dtype, layout):
    if layout == "bshd":
        return torch.randn(b, s, h, d, device=DEV, dtype=dtype)
    if layout == "bhsd":  # (B, H, S, D) storage viewed as BSHD
        return torch.randn(b, h, s, d, device=DEV, dtype=dtype).transpose(1, 2)
    if layout == "packed":  # one of three in a (B, S, 3, H, D') buffer
        return torch.randn(b, s, 3, h, d + 8, device=DEV, dtype=dtype)[:, :, 1, :, :d]
    raise ValueError(layout)


def poisoned(b, s, h, d, dtype):
    full = torch.full((b, s + 3, h, d + 8), float("nan"), device=DEV, dtype=dtype)
    return full, full[:, :s, :, :d]


def run_case(b, sq, sk, hq, hkv, d, causal, dtype, layout="bshd", deterministic=False, splits=0):
    fc_sm90_bwd.force_kv_splits(splits)
    try:
        return run_case_unforced(b, sq, sk, hq, hkv, d, causal, dtype, layout, deterministic, splits)
    finally:
        fc_sm90_bwd.force_kv_splits(0)


def run_case_unforced(b, sq, sk, hq, hkv, d, causal, dtype, layout, deterministic, splits):
    q = make(b, sq, hq, d, dtype, layout)
    k = make(b, sk, hkv, d, dtype, layout)
    v = make(b, sk, hkv, d, dtype, layout)
    dout = make(b, sq, hq, d, dtype, layout)
    o64, lse64, dq64, dk64, dv64 = grads(q, k, v, dout, causal)
    _, _, dqn, dkn, dvn = grads(q, k, v, dout, causal, naive_dtype=dtype)
    out = o64.to(dtype)
    lse = lse64.float().contiguous()
    dq_full, dq = poisoned(b, sq, hq, d, dtype)
    dk_full, dk = poisoned(b, sk, hkv, d, dtype)
    dv_full, dv = poisoned(b, sk, hkv, d, dtype)
    ws = fc_sm90_bwd.backward(dout, q, k, v, out, lse, causal, dq, dk, dv, deterministic=deterministic)
    torch.cuda.synchronize()
    del ws
    r = dict(b=b, sq=sq, sk=sk, hq=hq, hkv=hkv, d=d, causal=causal, dtype=str(dtype).split(".")[-1], layout=layout,
             det=deterministic, splits=splits)
    ok = True
    if deterministic:  # bit-identical over repeated runs
        same = True
        for _ in range(int(os.environ.get("DET_REPEATS", "5"))):
            dq2, dk2, dv2 = (torch.empty_like(t) for t in (dq, dk, dv))
            ws = fc_sm90_bwd.backward(dout, q, k, v, out, lse, causal, dq2, dk2, dv2, deterministic=True)
            torch.cuda.synchronize()
            del ws
            same = same and all(torch.equal(a.view(torch.int16), b_.view(torch.int16))
                                for a, b_ in ((dq, dq2), (dk, dk2), (dv, dv2)))
        r["bit_identical"] = same
        ok = ok and same
    for name, got, ref, naive, full, n_rows in (("dq", dq, dq64, dqn, dq_full, sq), ("dk", dk, dk64, dkn, dk_full, sk),
                                                ("dv", dv, dv64, dvn, dv_full, sk)):
        diff = (got.double() - ref).abs().nan_to_num(nan=float("inf"))
        err = diff.max().item()
        where = [int(i) for i in torch.unravel_index(diff.argmax(), diff.shape)]  # (b, row, head, col) of the worst
        err_naive = (naive.double() - ref).abs().max().item()
        rr = ref.to(dtype)
        floor = 2 * ((rr + 0.3 - 0.3) - rr).abs().max().item()  # FlashAttention's: rounding at magnitude ~0.3
        tol = 3 * err_naive + floor
        nan_inside = bool(torch.isnan(got).any().item())
        pad_ok = bool(torch.isnan(full[:, n_rows:]).all().item() and torch.isnan(full[:, :n_rows, :, d:]).all().item())
        this_ok = err <= tol and not nan_inside and pad_ok
        ok = ok and this_ok
        r[name] = dict(err=err, naive=err_naive, tol=tol, nan=nan_inside, pad_ok=pad_ok, ok=this_ok, where=where,
                       bad_frac=(diff > tol).double().mean().item())
    r["ok"] = ok
    return r


def cases(quick):
    only = os.environ.get("CHECK_DIMS")
    dims = [int(x) for x in only.split(",")] if only else [128]
    dtypes = [torch.bfloat16] + ([torch.float16] if os.environ.get("CHECK_FP16") else [])
    if os.environ.get("CHECK_FP16_ONLY"):
        dtypes = [torch.float16]
    for dtype in dtypes:
        for d in dims:
            for causal in (False, True):
                yield (1, 128, 128, 1, 1, d, causal, dtype, "bshd")      # one tile
                if quick:
                    continue
                yield (2, 512, 512, 4, 4, d, causal, dtype, "bshd")      # several blocks both ways
                yield (1, 300, 500, 2, 2, d, causal, dtype, "bshd")      # ragged, Sq < Sk
                yield (1, 500, 200, 2, 2, d, causal, dtype, "bshd")      # Sq > Sk: rows with no key
                yield (2, 384, 384, 8, 2, d, causal, dtype, "bshd")      # GQA 4:1
                yield (1, 257, 257, 4, 1, d, causal, dtype, "bhsd")      # MQA, BHSD strides
                yield (2, 200, 200, 3, 3, d, causal, dtype, "packed")    # packed view
                yield (1, 17, 1000, 2, 2, d, causal, dtype, "bshd")      # few queries
                yield (1, 1, 1, 1, 1, d, causal, dtype, "bshd")          # one query, one key
                yield (2, 65, 129, 2, 1, d, causal, dtype, "bshd")       # one row / key past a block
                yield (1, 2048, 2048, 2, 2, d, causal, dtype, "bshd")    # longer sweep
                yield (1, 2048, 2048, 2, 2, d, causal, dtype, "bshd", True)  # deterministic: 16 slices
                yield (2, 1000, 1100, 8, 2, d, causal, dtype, "bshd", True)  # deterministic, GQA, ragged
                if os.environ.get("CHECK_LPT"):  # more (kv head, batch) rows than one longest-first chunk
                    yield (8, 2048, 2048, 4, 4, d, causal, dtype, "bshd")  # 32 rows of 16 blocks: 25 + 7
                    yield (10, 1500, 1500, 4, 2, d, causal, dtype, "bshd", False, 2)  # 20 rows of split clusters: 17 + 3
                # GQA with the kv split forced (CHECK_SPLITS=1,2,4): default and deterministic mode
                for splits in [int(x) for x in os.environ.get("CHECK_SPLITS", "").split(",") if x]:
                    yield (2, 700, 700, 16, 2, d, causal, dtype, "bshd", False, splits)  # 8:1
                    yield (1, 333, 520, 8, 2, d, causal, dtype, "bshd", True, splits)    # 4:1, ragged
                    yield (2, 1000, 1000, 16, 2, d, causal, dtype, "bshd", True, splits)  # 8:1, several key blocks a CTA


def main():
    quick = "--quick" in sys.argv
    results = []
    t0 = time.time()
    n_fail = 0
    for c in cases(quick):
        try:
            r = run_case(*c)
        except Exception as e:  # noqa: BLE001 - report and go on
            r = dict(case=str(c), error=repr(e), ok=False)
        results.append(r)
        short = {k: v for k, v in r.items() if k not in ("dq", "dk", "dv", "ok")}
        errs = " ".join(f"{g}={r[g]['err']:.2e}/{r[g]['tol']:.2e}(naive {r[g]['naive']:.1e})"
                        + ("" if r[g]["ok"] else f"!at{r[g]['where']} bad{r[g]['bad_frac']:.3f} nan{int(r[g]['nan'])} pad{int(r[g]['pad_ok'])}")
                        for g in ("dq", "dk", "dv") if g in r)
        print("OK  " if r["ok"] else "FAIL", short, errs, flush=True)
        n_fail += not r["ok"]
    print(f"{len(results)} cases, {n_fail} failed, {time.time() - t0:.1f}s", flush=True)
    out = os.environ.get("OUT")
    if out:
        # One JSON line per run, appended: a device call returns at most 8 files.
        with open(os.path.join(out, os.environ.get("CHECK_NAME", "checks.jsonl")), "a") as f:
            f.write(json.dumps(dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                                    argv=sys.argv, dims=os.environ.get("CHECK_DIMS"), results=results)) + "\n")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
