"""Issue 14 (session 9, round 2): where a launch's idle SM time goes. Runs the timed variants of
the library's non-causal 2k tiles (26: bf16 d128, 27: bf16 d256; s10_timeline.h stamps
%globaltimer per CTA at entry, per tile and at exit) in bursts of 4 back-to-back launches, and
their plain twins (28: d128, 20: d256) for the cost of the stamps. Prints a breakdown of the SM
time of each launch and writes the raw stamps to $OUT/s10_timeline.npz and the summary to
$OUT/s10_timeline.json.

  FC_LIB=libfc_s10.so [TIMELINE_CELLS=128:26:28,256:27:20,128:29:28,256:30:20] python3 s10_timeline.py"""
import ctypes
import json
import os
import sys

import numpy as np
import torch

import bench
import fc_sm90

LAUNCHES, MAX_CTAS = 4, 1024
# head dim : timed variant : plain twin (29/30: the 16-byte-store epilogue, FC_SM90_VARIANTS_11)
CELLS = [tuple(int(x) for x in c.split(":")) for c in os.environ.get("TIMELINE_CELLS", "128:26:28,256:27:20").split(",")]


def fetch():
    lib = fc_sm90._LIB
    lib.fc_sm90_timeline.restype = ctypes.c_int
    lib.fc_sm90_timeline.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    buf = np.zeros(LAUNCHES * MAX_CTAS * 256, dtype=np.uint64)
    slots = lib.fc_sm90_timeline(buf.ctypes.data, LAUNCHES, MAX_CTAS)
    assert slots > 0, "timeline fetch failed"
    return buf[:LAUNCHES * MAX_CTAS * slots].reshape(LAUNCHES, MAX_CTAS, slots).astype(np.int64)


def analyse(st, tiles_max):
    """st: (ctas, slots) stamps of one launch (ns). Returns a dict of µs figures."""
    st = st[st[:, 0] > 0]
    n = len(st)
    t0 = st[:, 0].min()
    exit_ = np.maximum.reduce([st[:, 2], st[:, 3], st[:, 4]])
    t1 = exit_.max()
    span = (t1 - t0) / 1e3
    us = lambda x: float(np.median(x)) / 1e3  # noqa: E731
    ntiles = st[:, 6]
    tile = lambda wg, i, k: st[:, 8 + wg * 3 * tiles_max + 3 * i + k]  # noqa: E731
    # Per warpgroup 0 (the other ping-pongs half a turn behind it).
    first_mma = tile(0, 0, 0)
    r = dict(ctas=n, span_us=span, tiles_per_cta=[int(ntiles.min()), int(ntiles.max())],
             entry_skew_max_us=float(st[:, 0].max() - t0) / 1e3, entry_skew_med_us=us(st[:, 0] - t0),
             barrier_init_us=us(st[:, 1] - st[:, 0]), entry_to_first_mainloop_us=us(first_mma - st[:, 0]))
    durs, epis, gaps = [], [], []
    for wg in range(2):
        for i in range(int(ntiles.max())):
            have = ntiles > i
            b, e0, e1 = tile(wg, i, 0)[have], tile(wg, i, 1)[have], tile(wg, i, 2)[have]
            durs.append((wg, i, us(e0 - b), us(e1 - e0)))
            if i + 1 < ntiles.max():
                have2 = ntiles > i + 1
                gaps.append((wg, i, us(tile(wg, i + 1, 0)[have2] - tile(wg, i, 2)[have2])))
    d0 = [d for d in durs if d[0] == 0]
    mid = [d[2] for d in d0[1:-1]] or [d0[0][2]]
    r.update(first_tile_mainloop_us=d0[0][2], steady_tile_mainloop_us=float(np.median(mid)),
             last_tile_mainloop_us=d0[-1][2], epilogue_first_us=d0[0][3],
             epilogue_steady_us=float(np.median([d[3] for d in d0[1:-1]] or [d0[0][3]])),
             epilogue_last_us=d0[-1][3], boundary_gap_us=float(np.median([g[2] for g in gaps if g[0] == 0] or [0])))
    # The last tile: from its epilogue end (both warpgroups) to the CTA's exit, and the producer.
    last_epi_end = np.array([max(tile(0, k - 1, 2)[j], tile(1, k - 1, 2)[j]) if k > 0 else 0
                             for j, k in enumerate(ntiles)])
    r["exit_after_last_epilogue_us"] = us(exit_ - last_epi_end)
    r["producer_done_before_exit_us"] = us(exit_ - st[:, 2])
    # SM time (SM-µs) of the launch: 132 x span, split into start (t0 -> CTA entry), busy (entry ->
    # exit) and end (exit -> t1); the end split by tile count (CTAs with fewer tiles: the wave tail).
    sms = 132
    start_idle = float((st[:, 0] - t0).sum()) / 1e3
    end_idle = (t1 - exit_) / 1e3
    full = ntiles == ntiles.max()
    busy = float((exit_ - st[:, 0]).sum()) / 1e3
    # Inside busy: before the first mainloop, and in the last tile's epilogue (nothing overlaps it).
    startup = float((first_mma - st[:, 0]).sum()) / 1e3
    last_epi = float(sum(us(np.array([tile(0, k - 1, 2)[j] - tile(0, k - 1, 1)[j]])) for j, k in enumerate(ntiles) if k))
    r.update(sm_time_total=sms * span, sm_idle_start_pct=100 * start_idle / (sms * span),
             sm_idle_end_full_ctas_pct=100 * float(end_idle[full].sum()) / (sms * span),
             sm_idle_end_short_ctas_pct=100 * float(end_idle[~full].sum()) / (sms * span),
             sm_idle_no_cta_pct=100 * (sms - n) * span / (sms * span),
             busy_pct=100 * busy / (sms * span), startup_in_busy_pct=100 * startup / (sms * span),
             last_epilogue_in_busy_pct=100 * last_epi / (sms * span),
             exit_spread_full_ctas_us=float(exit_[full].max() - exit_[full].min()) / 1e3)
    r["per_tile_us"] = durs
    return r, (t0, t1)


def main():
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(200):
        x @ x
    torch.cuda.synchronize()
    del x
    out_dir = os.environ.get("OUT")
    summary, raw = [], {}
    for d, timed, plain in CELLS:
        s = 2048
        b, h = 16384 // s, 2048 // d
        q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
        k, v = torch.randn_like(q), torch.randn_like(q)
        out = torch.empty_like(q)
        lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
        f = bench.flops(b, h, s, s, d, False)

        def run(n):
            def go():
                fc_sm90.VARIANT = n
                return fc_sm90.forward(q, k, v, False, out=out, lse=lse)
            return go
        # Cost of the stamps: rotated, 4 rounds each.
        t = {timed: [], plain: []}
        for r in range(4):
            for n in ((timed, plain) if r % 2 == 0 else (plain, timed)):
                t[n].append(f / bench.time_ms(run(n), iters=10, reps=5) / 1e9)
        fc_sm90.VARIANT = timed
        fc_sm90.forward(q, k, v, False, out=out, lse=lse)
        torch.cuda.synchronize()
        o_timed = out.clone()
        fc_sm90.VARIANT = plain
        fc_sm90.forward(q, k, v, False, out=out, lse=lse)
        torch.cuda.synchronize()
        same = bool(torch.equal(o_timed, out))
        launches = []
        for burst in range(2):  # burst 0 after a sync; burst 1 queued right behind plain launches
            fetch()  # clears and resets the launch counter
            if burst == 1:
                for _ in range(5):
                    run(plain)()
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
            ev[0].record()
            for _ in range(LAUNCHES):
                run(timed)()
            ev[1].record()
            torch.cuda.synchronize()
            st = fetch()
            per_call = ev[0].elapsed_time(ev[1]) * 1e3 / LAUNCHES
            res = [analyse(st[i], 40) for i in range(LAUNCHES)]
            gaps = [(res[i + 1][1][0] - res[i][1][1]) / 1e3 for i in range(LAUNCHES - 1)]
            raw[f"d{d}_burst{burst}"] = st
            for i, (r, _) in enumerate(res):
                r.update(d=d, burst=burst, launch=i, event_us_per_call=per_call,
                         gap_to_next_us=gaps[i] if i < len(gaps) else None)
                launches.append(r)
        med = lambda key: float(np.median([r[key] for r in launches[1:]]))  # noqa: E731
        keys = ["span_us", "gap_to_next_us", "entry_skew_max_us", "barrier_init_us", "entry_to_first_mainloop_us",
                "first_tile_mainloop_us", "steady_tile_mainloop_us", "last_tile_mainloop_us", "epilogue_first_us",
                "epilogue_steady_us", "epilogue_last_us", "boundary_gap_us", "exit_after_last_epilogue_us",
                "producer_done_before_exit_us", "exit_spread_full_ctas_us", "busy_pct", "sm_idle_start_pct",
                "sm_idle_end_full_ctas_pct", "sm_idle_end_short_ctas_pct", "sm_idle_no_cta_pct", "startup_in_busy_pct",
                "last_epilogue_in_busy_pct"]
        print(f"bf16 d{d} non-causal 2k (b={b} h={h}): timed v{timed} {np.median(t[timed]):.1f} TFLOP/s "
              f"[{min(t[timed]):.0f}-{max(t[timed]):.0f}], plain v{plain} {np.median(t[plain]):.1f} "
              f"[{min(t[plain]):.0f}-{max(t[plain]):.0f}]; outputs bit-identical: {same}")
        print(f"  tiles per CTA {launches[0]['tiles_per_cta']}, CTAs {launches[0]['ctas']}, "
              f"event time per call (burst of 4) {launches[0]['event_us_per_call']:.1f} / {launches[-1]['event_us_per_call']:.1f} us")
        for key in keys:
            vals = [r[key] for r in launches if r[key] is not None]
            print(f"  {key:32s} median {np.median(vals):9.2f}  [{min(vals):.2f} .. {max(vals):.2f}]")
        print("  per-tile (wg, tile, mainloop us, epilogue us), launch 1 of burst 0: " +
              " ".join(f"({a},{i},{m:.1f},{e:.1f})" for a, i, m, e in launches[1]["per_tile_us"]))
        summary.append(dict(d=d, seqlen=s, batch=b, heads=h, tflops_timed=t[timed], tflops_plain=t[plain],
                            identical=same, launches=launches, median={k_: med(k_) for k_ in keys if k_ != "gap_to_next_us"}))
        del q, k, v, out, lse
    if out_dir:
        np.savez_compressed(os.path.join(out_dir, "s10_timeline.npz"), **raw)
        with open(os.path.join(out_dir, "s10_timeline.json"), "w") as fh:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, cells=summary), fh)


if __name__ == "__main__":
    sys.exit(main())
