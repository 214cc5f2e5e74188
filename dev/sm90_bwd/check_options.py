"""The sm90 backward's score-option kernels (bwd_score_options.h: sliding window, softcap, ALiBi)
against a float64 reference with the options, under FlashAttention's rule for gradients (max error
<= 3x a same-precision naive implementation's + the rounding floor of check.py; NaN never passes;
outputs poisoned inside larger buffers). The forward (O, LSE) comes from the float64 reference.
check.py's sibling for the options (the library's tests/gpu/score_options_test.cpp cases, at
d <= 128). SAN=1: a few small cases only, no reference (for compute-sanitizer).
Appends a JSON line to $OUT/$CHECK_NAME (default checks_options.jsonl) if OUT is set."""
import json
import math
import os
import sys
import time

import torch

import fc_sm90_bwd
from check import make, poisoned

torch.manual_seed(0)
DEV = "cuda"


def visible(sq, sk, causal, left, right, device=DEV):
    i = torch.arange(sq, device=device)[:, None]
    j = torch.arange(sk, device=device)[None, :]
    offset = j - (i + sk - sq)
    ok = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if causal:
        ok &= offset <= 0
    if right >= 0:
        ok &= offset <= right
    if left >= 0:
        ok &= offset >= -left
    return ok, (i + sk - sq - j).abs()


def grads(q, k, v, dout, causal, left, right, softcap, slopes, naive_dtype=None):
    """check.grads with the options: s = softcap tanh(scale q.k / softcap) - slope |i + sk - sq - j|,
    the window's and causal mask, dS times 1 - tanh^2."""
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    g = hq // hkv
    scale = 1.0 / math.sqrt(d)
    mm_t = torch.float64 if naive_dtype is None else naive_dtype
    ew_t = torch.float64 if naive_dtype is None else torch.float32
    mm = lambda x, y: (x.to(mm_t) @ y.to(mm_t)).to(ew_t)
    qh, kh, vh, doh = (t.transpose(1, 2) for t in (q, k, v, dout))
    kh = kh.repeat_interleave(g, dim=1)
    vh = vh.repeat_interleave(g, dim=1)
    s = mm(qh, kh.transpose(-1, -2)) * scale
    dscore = None
    if softcap > 0:
        t = torch.tanh(s / softcap)
        s = softcap * t
        dscore = 1 - t * t
    ok, dist = visible(sq, sk, causal, left, right)
    if slopes is not None:
        sl = slopes.to(ew_t).reshape(-1, hq) if slopes.dim() == 2 else slopes.to(ew_t)[None, :]
        s = s - sl[:, :, None, None] * dist.to(ew_t)
    s = s.masked_fill(~ok, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    lse_safe = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
    p = torch.exp(s - lse_safe[..., None])
    o = mm(p, vh)
    dv = mm(p.transpose(-1, -2), doh)
    dp = mm(doh, vh.transpose(-1, -2))
    dsum = (doh.to(ew_t) * o.to(mm_t).to(ew_t)).sum(-1, keepdim=True)
    ds = p * (dp - dsum)
    if dscore is not None:
        ds = ds * dscore
    dq = mm(ds, kh) * scale
    dk = mm(ds.transpose(-1, -2), qh) * scale
    dk = dk.reshape(b, hkv, g, sk, d).sum(2)
    dv = dv.reshape(b, hkv, g, sk, d).sum(2)
    tr = lambda t: t.transpose(1, 2)
    return tr(o), lse, tr(dq), tr(dk), tr(dv)


def slopes_of(kind, b, hq):
    if kind == 0:
        return None
    n = hq * (b if kind == 2 else 1)
    s = (torch.rand(n, device=DEV, dtype=torch.float32) * 0.5 + 0.05)
    return s.reshape(b, hq).contiguous() if kind == 2 else s


# name, (b, sq, sk, hq, hkv, d, causal), window (left, right), softcap, alibi (0, 1 per head, 2 per batch),
# deterministic, forced kv splits (tests/gpu/score_options_test.cpp's cases at d <= 128, and more)
CASES = [
    ("window_d64", (1, 1000, 1000, 2, 2, 64, False), (100, 50), 0.0, 0),
    ("window_left_causal_d128", (1, 2049, 2049, 2, 1, 128, True), (256, -1), 0.0, 0),
    ("window_1k_over_4k_causal_d128", (1, 4096, 4096, 1, 1, 128, True), (1024, -1), 0.0, 0),
    ("window_right_only_q_shorter_d96", (1, 130, 1000, 4, 2, 96, False), (-1, 40), 0.0, 0),
    ("window_q_longer_empty_rows_d128", (1, 1000, 200, 2, 2, 128, False), (10, 3), 0.0, 0),
    ("window_q_shorter_left_d128", (1, 300, 1000, 2, 2, 128, False), (70, 0), 0.0, 0),
    ("window_zero_d64", (2, 300, 300, 2, 2, 64, False), (0, 0), 0.0, 0),
    ("softcap_d128", (1, 1000, 1000, 2, 2, 128, False), (-1, -1), 5.0, 0),
    ("softcap_causal_gqa_d128", (1, 777, 777, 8, 2, 128, True), (-1, -1), 1.0, 0),
    ("alibi_d128", (2, 500, 700, 2, 2, 128, False), (-1, -1), 0.0, 1),
    ("alibi_per_batch_causal_mqa_d128", (2, 700, 500, 4, 1, 128, True), (-1, -1), 0.0, 2),
    ("all_gqa_d64", (2, 1000, 1100, 4, 2, 64, False), (200, 30), 3.0, 2),
    ("all_causal_d128", (1, 1500, 1200, 4, 2, 128, True), (300, -1), 1.5, 1),
    ("all_d40", (1, 300, 257, 3, 1, 40, False), (50, 20), 2.0, 1),
    ("window_causal_det_d128", (1, 2048, 2048, 2, 2, 128, True), (256, -1), 0.0, 0, True),
    ("all_det_gqa_d128", (2, 1000, 1100, 8, 2, 128, False), (200, 30), 3.0, 2, True),
    ("window_causal_split2_d128", (2, 700, 700, 8, 2, 128, True), (128, -1), 0.0, 0, False, 2),
    ("softcap_alibi_split4_d128", (1, 600, 600, 16, 2, 128, False), (-1, -1), 2.0, 1, False, 4),
]
SAN_CASES = ["window_q_longer_empty_rows_d128", "all_gqa_d64", "softcap_causal_gqa_d128", "alibi_per_batch_causal_mqa_d128",
             "all_causal_d128", "window_causal_det_d128", "window_causal_split2_d128"]


def run_case(name, shape, window, softcap, alibi, det=False, splits=0, san=False):
    b, sq, sk, hq, hkv, d, causal = shape
    dtype = torch.bfloat16
    q, dout = (make(b, sq, hq, d, dtype, "bshd") for _ in range(2))
    k, v = (make(b, sk, hkv, d, dtype, "bshd") for _ in range(2))
    slopes = slopes_of(alibi, b, hq)
    left, right = window
    if san:
        out = torch.randn_like(q)
        lse = torch.randn(b, hq, sq, device=DEV, dtype=torch.float32) + 5
    else:
        o64, lse64, dq64, dk64, dv64 = grads(q, k, v, dout, causal, left, right, softcap, slopes)
        _, _, dqn, dkn, dvn = grads(q, k, v, dout, causal, left, right, softcap, slopes, naive_dtype=dtype)
        out = o64.to(dtype)
        lse = lse64.float().contiguous()
    dq_full, dq = poisoned(b, sq, hq, d, dtype)
    dk_full, dk = poisoned(b, sk, hkv, d, dtype)
    dv_full, dv = poisoned(b, sk, hkv, d, dtype)
    fc_sm90_bwd.set_options(left, right, softcap, slopes)
    fc_sm90_bwd.force_kv_splits(splits)
    try:
        ws = fc_sm90_bwd.backward(dout, q, k, v, out, lse, causal, dq, dk, dv, deterministic=det)
        torch.cuda.synchronize()
        del ws
    finally:
        fc_sm90_bwd.set_options()
        fc_sm90_bwd.force_kv_splits(0)
    r = dict(name=name, det=det, splits=splits)
    if san:
        r["ok"] = True
        return r
    ok = True
    for gname, got, ref, naive, full, n_rows in (("dq", dq, dq64, dqn, dq_full, sq), ("dk", dk, dk64, dkn, dk_full, sk),
                                                 ("dv", dv, dv64, dvn, dv_full, sk)):
        diff = (got.double() - ref).abs().nan_to_num(nan=float("inf"))
        err = diff.max().item()
        err_naive = (naive.double() - ref).abs().max().item()
        rr = ref.to(dtype)
        floor = 2 * ((rr + 0.3 - 0.3) - rr).abs().max().item()
        tol = 3 * err_naive + floor
        nan_inside = bool(torch.isnan(got).any().item())
        pad_ok = bool(torch.isnan(full[:, n_rows:]).all().item() and torch.isnan(full[:, :n_rows, :, d:]).all().item())
        this_ok = err <= tol and not nan_inside and pad_ok
        ok = ok and this_ok
        where = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
        r[gname] = dict(err=err, naive=err_naive, tol=tol, nan=nan_inside, pad_ok=pad_ok, ok=this_ok, where=where,
                        ref_at=ref[where].item(), max_ref=ref.abs().max().item())
    r["ok"] = ok
    return r


def main():
    san = bool(os.environ.get("SAN"))
    results, n_fail, t0 = [], 0, time.time()
    for c in CASES:
        if san and c[0] not in SAN_CASES:
            continue
        try:
            r = run_case(*c, san=san)
        except Exception as e:  # noqa: BLE001 - report and go on
            r = dict(name=c[0], error=repr(e), ok=False)
        results.append(r)
        errs = " ".join(f"{g}={r[g]['err']:.2e}/{r[g]['tol']:.2e}(naive {r[g]['naive']:.1e})"
                        + ("" if r[g]["ok"] else f" nan{int(r[g]['nan'])} pad{int(r[g]['pad_ok'])}")
                        for g in ("dq", "dk", "dv") if g in r)
        print("OK  " if r["ok"] else "FAIL", r["name"], r.get("error", ""), errs, flush=True)
        n_fail += not r["ok"]
    print(f"check_options.py: {len(results)} cases, {n_fail} failed, {time.time() - t0:.1f}s", flush=True)
    if os.environ.get("OUT") and not san:
        with open(os.path.join(os.environ["OUT"], os.environ.get("CHECK_NAME", "checks_options.jsonl")), "a") as f:
            f.write(json.dumps(dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                                    results=results)) + "\n")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
