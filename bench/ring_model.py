"""The cost model of docs/context_parallelism.md: time per attention layer of ring attention, alone
or under head-parallel (Ulysses) all-to-all, on P GPUs, from a handful of hardware figures.

    python3 bench/ring_model.py table               # the plan's tables (markdown), default figures
    python3 bench/ring_model.py check RESULTS.json  # predicted vs measured for a bench/ring.py run,
                                                    # the figures re-fitted from that run's own rows

The model (per layer, per rank; zigzag causal split, so every ring step is the same size):
  F        = 2 * B * H * S^2 * D                forward FLOPs of causal attention over S tokens
  P = U * R                                     U-way Ulysses (heads) inside, R-way ring outside
  ring step s = 0 .. R-1:  compute F / (P * R) at the causal (s = 0) or unmasked rate;
            sends the K/V block, 2 * B * (S/R) * (Hkv/U) * D * bytes, to the next rank while computing
            (none at the last step); takes max(compute, transfer) + a fixed overhead per step
  merge    after each step past the first: read the partial and the running result, write it back
  backward the same steps at 2.5x the FLOPs and the backward rates; each step also moves the
           block's dK/dV (the dtype after one rank's share, float32 after more), and the finished
           dK/dV make one more hop that nothing hides
  Ulysses  all-to-all of q, k, v and out (forward) and of dout, dq, dk, dv (backward) over U ranks:
           (U-1)/U of each rank's (S/P)-token slices, at the intra-node bandwidth, not overlapped
Efficiency = (one GPU's time for the whole problem, at the causal rates) / (P * modelled time).
"""

import argparse
import dataclasses
import json
import sys


@dataclasses.dataclass
class Hardware:
    """Achieved rates (FLOP/s by FlashAttention's count) and bandwidths (bytes/s per GPU, per direction)."""

    name: str = "H100/H200 (flashcore measured on H100 at 16k tokens; links assumed)"
    fwd_causal: float = 718e12   # sm90 forward, bf16, d128, causal (bench/results/..._ae54fe4_hopper.json)
    fwd_full: float = 731e12     # same, no mask
    bwd_causal: float = 327e12   # sm80 backward on H100, bf16, d128, causal (..._6ed8ff9_bwd.json)
    bwd_full: float = 342e12     # same, no mask
    hbm: float = 3.0e12          # device-to-device copy, bytes read + written (H100 here; H200: ~4.3e12)
    nvlink: float = 370e9        # NCCL point-to-point over NVLink 4 (900 GB/s both ways, 450 each; ~80% achieved)
    network: float = 45e9        # one 400 Gb/s NIC per GPU (InfiniBand NDR / RoCE), ~90% achieved
    gpus_per_node: int = 8
    step_overhead: float = 20e-6  # per ring step on the GPU timeline: NCCL hand-offs, small kernels


def _ring_link(hw, P, U):
    """Bandwidth of the ring's slowest hop: inside a node while the ring fits in one."""
    return hw.nvlink if P <= hw.gpus_per_node else hw.network


def predict(S, H, Hkv, D, P, U=1, B=1, hw=None, dtype_bytes=2):
    """Modelled times (seconds) of one causal attention layer on P = U * R GPUs."""
    hw = hw or Hardware()
    assert P % U == 0, "P must be a multiple of U"
    R = P // U
    heads, heads_kv = H / U, max(Hkv / U, 1.0)  # past U = Hkv the kv heads are replicated, not split
    F = 2.0 * B * H * S * S * D
    link = _ring_link(hw, P, U)
    local = S / R                                # tokens each ring rank holds after the all-to-all
    kv_block = 2 * B * local * heads_kv * D * dtype_bytes
    step_flops = F / (P * R)

    def ring(rate_causal, rate_full, factor, sends):
        t = 0.0
        for s in range(R):
            compute = factor * step_flops / (rate_causal if s == 0 else rate_full)
            transfer = sends(s) / link if R > 1 else 0.0
            t += max(compute, transfer) + (hw.step_overhead if R > 1 else 0.0)
        return t

    out_bytes = B * local * heads * D
    merge = (R - 1) * out_bytes * (dtype_bytes * 3 if R == 2 else dtype_bytes + 8) / hw.hbm
    fwd = ring(hw.fwd_causal, hw.fwd_full, 1.0, lambda s: kv_block if s < R - 1 else 0.0) + merge
    # Backward: K/V (not at the last step) and the dK/dV behind them (one share in the dtype at step 0,
    # float32 after), then the finished dK/dV's last hop, exposed; dq and dk/dv sums in float32.
    dkv = lambda s: (kv_block if s == 0 else 2 * kv_block) if s < R - 1 else 0.0
    bwd = ring(hw.bwd_causal, hw.bwd_full, 2.5, lambda s: (kv_block if s < R - 1 else 0.0) + dkv(s))
    bwd += (kv_block / link if R > 1 else 0.0) + (R - 1) * 3 * 4 * (out_bytes + kv_block / dtype_bytes) / hw.hbm
    # Ulysses: (U-1)/U of each rank's S/P-token slices of q, k, v, out (and back for the backward).
    a2a = 0.0
    if U > 1:
        slice_bytes = B * (S / P) * D * dtype_bytes * (2 * H + 2 * max(Hkv, U))
        a2a = slice_bytes * (U - 1) / U / hw.nvlink
    one_gpu = F / hw.fwd_causal + 2.5 * F / hw.bwd_causal
    total = fwd + bwd + 2 * a2a
    return dict(S=S, H=H, Hkv=Hkv, D=D, P=P, U=U, R=R, local_tokens=S / P, ring_tokens=local, link=link,
                fwd=fwd + a2a, bwd=bwd + a2a, total=total, a2a=a2a, one_gpu=one_gpu, efficiency=one_gpu / (P * total),
                kv_block_mib=kv_block / 2**20, step_compute_ms=1e3 * step_flops / hw.fwd_full,
                step_transfer_ms=1e3 * kv_block / link if R > 1 else 0.0)


def threshold_tokens(H, Hkv, bandwidth, rate, dtype_bytes=2):
    """Local tokens per ring rank above which a forward step's compute covers its K/V transfer:
    2 B H (S/R)^2 D / (R_fwd) >= 2 B (S/R) Hkv D b / BW  <=>  S/R >= b * R_fwd / (g * BW), g = H / Hkv."""
    return dtype_bytes * rate / ((H / Hkv) * bandwidth)


def table(hw):
    lines = ["| S | H/Hkv | P | U x R | tokens/GPU | K/V step MiB | step compute / transfer ms | fwd ms | fwd+bwd ms | efficiency |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for S, H, Hkv in ((1 << 20, 32, 32), (1 << 20, 32, 8)):
        for P in (8, 16, 64, 256, 1024):
            for U in sorted({1, min(8, Hkv, P)}):
                r = predict(S, H, Hkv, 128, P, U, hw=hw)
                lines.append(f"| {S // 1024}k | {H}/{Hkv} | {P} | {U} x {r['R']} | {r['local_tokens']:.0f} | "
                             f"{r['kv_block_mib']:.1f} | {r['step_compute_ms']:.3f} / {r['step_transfer_ms']:.3f} | "
                             f"{1e3 * r['fwd']:.1f} | {1e3 * r['total']:.1f} | {r['efficiency']:.2f} |")
    lines += ["", "| tokens/GPU (weak scaling) | H/Hkv | P | U x R | fwd+bwd s | efficiency |", "|---|---|---|---|---|---|"]
    for per_gpu in (8192, 32768):
        for H, Hkv in ((32, 32), (32, 8)):
            for P in (8, 64, 1024):
                for U in sorted({1, min(8, Hkv, P)}):
                    r = predict(per_gpu * P, H, Hkv, 128, P, U, hw=hw)
                    lines.append(f"| {per_gpu} | {H}/{Hkv} | {P} | {U} x {r['R']} | {r['total']:.2f} | "
                                 f"{r['efficiency']:.2f} |")
    lines += ["", "Forward transfer hidden when tokens per ring rank >= (threshold_tokens):", "",
              "| link | GB/s | MHA (g=1) | GQA g=4 | GQA g=8 |", "|---|---|---|---|---|"]
    for name, bw in (("NVLink 4, one node", hw.nvlink), ("400 Gb/s NIC per GPU", hw.network)):
        cells = [f"{threshold_tokens(32, 32 // g, bw, hw.fwd_full):.0f}" for g in (1, 4, 8)]
        lines.append(f"| {name} | {bw / 1e9:.0f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fit(results):
    """Hardware re-fitted from a bench/ring.py run: the one-GPU rows give the attention rates (the
    causal rates stand in for both), the link rows the point-to-point bandwidth, the context the HBM."""
    hw = Hardware(name=f"fitted to {results.get('context', {}).get('run_name', 'a bench/ring.py run')}")
    rows = results.get("rows", [])
    ones = {(r["pass"], r["heads_kv"], r["seqlen_q"]): r for r in rows if r.get("impl") == "flashcore" and r.get("ms")}
    if ones:
        S = max(k[2] for k in ones)
        fwd = next(r for k, r in ones.items() if k[0] == "fwd" and k[2] == S and r["heads"] == r["heads_kv"])
        both = next(r for k, r in ones.items() if k[0] == "fwd_bwd" and k[2] == S and r["heads"] == r["heads_kv"])
        F = 2.0 * fwd["batch"] * fwd["heads"] * S * S * fwd["head_dim"]
        hw.fwd_causal = hw.fwd_full = F / (fwd["ms"] * 1e-3)
        hw.bwd_causal = hw.bwd_full = 2.5 * F / ((both["ms"] - fwd["ms"]) * 1e-3)
    links = [r for r in results.get("links", []) if r.get("ms")]
    if links:
        hw.nvlink = max(r["gb_per_s"] for r in links) * 1e9
    return hw


def check(path):
    with open(path, encoding="utf-8") as f:
        results = json.load(f)
    hw = fit(results)
    print(f"figures: {hw}\n")
    print("| layout | comm | pass | S | H/Hkv | measured ms | predicted ms | measured eff. | predicted eff. | hidden |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results.get("rows", []):
        if r.get("impl") != "flashcore_ring" or r.get("comm") not in ("nccl", "none"):
            continue
        p = predict(r["seqlen_q"], r["heads"], r["heads_kv"], r["head_dim"], r["world_size"], 1, r["batch"], hw)
        predicted = p["fwd"] if r["pass"] == "fwd" else p["total"]
        if r["comm"] == "none":
            hw_local = dataclasses.replace(hw, nvlink=float("inf"), network=float("inf"))
            q = predict(r["seqlen_q"], r["heads"], r["heads_kv"], r["head_dim"], r["world_size"], 1, r["batch"], hw_local)
            predicted = q["fwd"] if r["pass"] == "fwd" else q["total"]
        one = p["one_gpu"] if r["pass"] == "fwd_bwd" else 2.0 * r["batch"] * r["heads"] * r["seqlen_q"] ** 2 * r["head_dim"] / hw.fwd_causal
        hidden = f"{r['hidden']:.2f}" if "hidden" in r else ""
        print(f"| {r.get('layout')} | {r['comm']} | {r['pass']} | {r['seqlen_q']} | {r['heads']}/{r['heads_kv']} | "
              f"{r['ms']:.2f} | {1e3 * predicted:.2f} | {r.get('efficiency', float('nan')):.3f} | "
              f"{one / (r['world_size'] * predicted):.3f} | {hidden} |")


def main():
    p = argparse.ArgumentParser(prog="bench/ring_model.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("table", help="the plan's tables with the default figures")
    c = sub.add_parser("check", help="predicted vs measured for a bench/ring.py results file")
    c.add_argument("results")
    args = p.parse_args()
    if args.command == "table":
        print(f"figures: {Hardware()}\n")
        print(table(Hardware()))
    else:
        check(args.results)


if __name__ == "__main__":
    sys.exit(main())
