"""Tables: a compact one for the terminal (flashcore's TFLOP/s and its ratios) and a full markdown
report beside the JSON."""
import os
from collections import Counter, OrderedDict

from .plan import FLASHCORE_IMPLS
from .results import latency_rows, sweep_rows

PASS_NAMES = {"fwd": "forward", "bwd": "backward", "fwd_bwd": "forward + backward"}
IMPL_ORDER = ("flashcore", "flashcore_sm80", "flashcore_sm90", "flashcore_det", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient",
              "sdpa_math", "cutlass_ex88")
# The per-cell comparison of kernel families (issue 14): columns and ratios.
FAMILY_COLUMNS = (("flashcore", "auto"), ("flashcore_sm80", "sm80"), ("flashcore_sm90", "sm90"),
                  ("flashcore_det", "det"), ("sdpa_cudnn", "cuDNN"), ("sdpa_flash", "FA2"), ("cutlass_ex88", "ex88"))
FAMILY_RATIOS = (("flashcore_sm90", "sdpa_cudnn", "sm90/cuDNN"), ("flashcore_sm90", "cutlass_ex88", "sm90/ex88"),
                 ("flashcore", "sdpa_cudnn", "auto/cuDNN"), ("flashcore_sm80", "sdpa_cudnn", "sm80/cuDNN"),
                 ("flashcore", "sdpa_flash", "auto/FA2"), ("flashcore_det", "sdpa_cudnn", "det/cuDNN"),
                 ("flashcore_det", "flashcore", "det/auto"))


def kv_groups(row):
    """heads / heads_kv: 1 for MHA (and rows from before heads_kv was recorded)."""
    kv = row.get("heads_kv") or row["heads"]
    return max(1, row["heads"] // kv)


def mask_label(causal, groups=1):
    return ("causal" if causal else "full") + (f" GQA {groups}:1" if groups > 1 else "")


def seqlen_label(s):
    return f"{s // 1024}k" if s >= 1024 and s % 1024 == 0 else str(s)


def _index(rows):
    """{(pass, dtype, head_dim, causal, kv groups): {seqlen: {impl: row}}}, in a stable order (MHA
    before GQA)."""
    table = OrderedDict()
    order = {p: i for i, p in enumerate(("fwd", "bwd", "fwd_bwd"))}
    for r in sorted(rows, key=lambda r: (order.get(r["pass"], 9), r["dtype"] != "bf16", r["dtype"], kv_groups(r) > 1,
                                         r["head_dim"], r["causal"], kv_groups(r), r["seqlen_q"])):
        table.setdefault((r["pass"], r["dtype"], r["head_dim"], r["causal"], kv_groups(r)), OrderedDict()).setdefault(
            r["seqlen_q"], {})[r["impl"]] = r
    return table


def _best_other(cells):
    others = [(r["tflops"], impl) for impl, r in cells.items() if impl not in FLASHCORE_IMPLS and r.get("tflops")]
    return max(others) if others else (None, None)


def _tf(cells, impl):
    return (cells.get(impl) or {}).get("tflops")


def ratio(cells, a, b):
    x, y = _tf(cells, a), _tf(cells, b)
    return x / y if x and y else None


def compare(cells):
    """flashcore's TFLOP/s, the fastest other backend (value, name), flashcore/best, flashcore/sdpa_flash,
    and the family ratios (sm90/cuDNN, sm90/ex88, auto/cuDNN)."""
    fc = _tf(cells, "flashcore")
    best, best_impl = _best_other(cells)
    fa = _tf(cells, "sdpa_flash")
    return {"flashcore": fc, "best": best, "best_impl": best_impl,
            "vs_best": fc / best if fc and best else None, "vs_flash": fc / fa if fc and fa else None,
            "kernels": (cells.get("flashcore") or {}).get("kernels"),
            "vs_cudnn": ratio(cells, "flashcore", "sdpa_cudnn"),
            "sm90_vs_cudnn": ratio(cells, "flashcore_sm90", "sdpa_cudnn"),
            "sm80_vs_cudnn": ratio(cells, "flashcore_sm80", "sdpa_cudnn"),
            "sm90_vs_ex88": ratio(cells, "flashcore_sm90", "cutlass_ex88"),
            "det_vs_cudnn": ratio(cells, "flashcore_det", "sdpa_cudnn"),
            "det_vs_default": ratio(cells, "flashcore_det", "flashcore")}


def _reasons(rows, impl):
    counts = Counter(r["reason"] for r in rows if r["impl"] == impl and r.get("tflops") is None and r.get("reason"))
    return counts.most_common()


def _geomean(values):
    values = [v for v in values if v]
    if not values:
        return None
    product = 1.0
    for v in values:
        product *= v
    return product ** (1.0 / len(values))


def summary_lines(rows):
    """Per dtype and pass: flashcore's geometric-mean ratio to the fastest other backend and to
    sdpa_flash, then each family against cuDNN (and sm90 against example 88): geometric mean, the
    lowest cell, and how many cells with seqlen >= 2k are below 1.0x (issue 14's bar)."""
    lines = []
    for (pass_, dtype), cells in _by_pass_dtype(rows).items():
        comps = [compare(c) for _s, c in cells]
        n = sum(1 for c in comps if c["flashcore"])
        gb, gf = _geomean([c["vs_best"] for c in comps]), _geomean([c["vs_flash"] for c in comps])
        lines.append(f"  {dtype} {pass_:8s}: flashcore ran {n}/{len(comps)} cells; geometric-mean ratio to the "
                     f"fastest other {gb:.2f}, to sdpa_flash {gf:.2f}" if gb and gf else
                     f"  {dtype} {pass_:8s}: flashcore ran {n}/{len(comps)} cells")
        for a, b, name in FAMILY_RATIOS[:4] + FAMILY_RATIOS[5:]:
            line = _ratio_summary(cells, a, b, name)
            if line:
                lines.append(f"  {dtype} {pass_:8s}: {line}")
    return lines


def _ratio_summary(cells, a, b, name, bar_seqlen=2048):
    values = [(ratio(c, a, b), where) for where, c in cells]
    values = [(v, where) for v, where in values if v]
    if not values:
        return None
    low, low_where = min(values)
    long_ = [v for v, where in values if where[-1] >= bar_seqlen]
    below = sum(1 for v in long_ if v < 1.0)
    return (f"{name} geometric mean {_geomean([v for v, _ in values]):.2f} over {len(values)} cells, lowest "
            f"{low:.2f} ({_where(low_where)}); seqlen >= {bar_seqlen // 1024}k below 1.00: {below}/{len(long_)}")


def _where(where):
    hd, causal, groups, seqlen = where
    return f"d{hd} {mask_label(causal, groups)} {seqlen_label(seqlen)}"


def _by_pass_dtype(rows):
    """{(pass, dtype): [((head_dim, causal, groups, seqlen), {impl: row})]}"""
    groups = OrderedDict()
    for (pass_, dtype, hd, causal, kv), by_seqlen in _index(rows).items():
        groups.setdefault((pass_, dtype), []).extend(((hd, causal, kv, s), c) for s, c in by_seqlen.items())
    return groups


def _fmt(value, digits=0, width=6):
    if value is None:
        return f"{'-':>{width}s}"
    return f"{value:{width}.{digits}f}"


def _families_present(rows):
    impls = {r["impl"] for r in rows}
    return bool(impls & {"flashcore_sm80", "flashcore_sm90", "flashcore_det", "cutlass_ex88"})


def family_lines(rows):
    """The per-cell table of kernel families: TFLOP/s of flashcore (auto, with the family it ran),
    sm80, sm90, cuDNN, FA2 and example 88, and the ratios sm90/cuDNN, sm90/ex88, auto/cuDNN, auto/FA2."""
    if not _families_present(rows):
        return []
    head = (f"{'pass':8s}{'dtype':6s}{'hd':>4s} {'mask':17s}{'S':>5s} |{'auto':>6s} {'ran':9s}"
            + "".join(f"{label:>7s}" for impl, label in FAMILY_COLUMNS[1:]) + " |"
            + "".join(f"{name:>11s}" for _a, _b, name in FAMILY_RATIOS))
    lines = ["kernel families, TFLOP/s per cell ('ran': the family flashcore auto ran) and ratios:", head]
    for (pass_, dtype), cells in _by_pass_dtype(rows).items():
        for (hd, causal, groups, seqlen), c in cells:
            kern = (c.get("flashcore") or {}).get("kernels") or "-"
            line = (f"{pass_:8s}{dtype:6s}{hd:4d} {mask_label(causal, groups):17s}{seqlen_label(seqlen):>5s} |"
                    f"{_fmt(_tf(c, 'flashcore'))} {kern:9s}"
                    + "".join(f"{_fmt(_tf(c, impl), width=7)}" for impl, _l in FAMILY_COLUMNS[1:]) + " |"
                    + "".join(f"{_fmt(ratio(c, a, b), 2, 11)}" for a, b, _n in FAMILY_RATIOS))
            lines.append(line)
    return lines


def family_markdown(rows):
    if not _families_present(rows):
        return []
    out = ["", "## Kernel families per cell", "",
           "TFLOP/s; `ran`: the family flashcore (auto) ran (forward+backward for fwd_bwd). "
           "cuDNN is SDPA's CUDNN_ATTENTION backend, FA2 its FLASH_ATTENTION backend, ex88 CUTLASS's "
           "example 88 (fp16 MHA only).", "",
           "| pass | dtype | hd | mask | seqlen | auto | ran | " + " | ".join(l for _i, l in FAMILY_COLUMNS[1:])
           + " | " + " | ".join(n for _a, _b, n in FAMILY_RATIOS) + " |",
           "|---|---|---|---|---|---|---|" + "---|" * (len(FAMILY_COLUMNS) - 1 + len(FAMILY_RATIOS))]
    for (pass_, dtype), cells in _by_pass_dtype(rows).items():
        for (hd, causal, groups, seqlen), c in cells:
            vals = [_fmt(_tf(c, impl), width=0).strip() for impl, _l in FAMILY_COLUMNS[1:]]
            rats = [_fmt(ratio(c, a, b), 2, 0).strip() for a, b, _n in FAMILY_RATIOS]
            out.append(f"| {pass_} | {dtype} | {hd} | {mask_label(causal, groups)} | {seqlen_label(seqlen)} | "
                       f"{_fmt(_tf(c, 'flashcore'), width=0).strip()} | {(c.get('flashcore') or {}).get('kernels') or '-'} | "
                       + " | ".join(vals) + " | " + " | ".join(rats) + " |")
    return out


def terminal_table(data, dtype=None):
    """The compact table for `dtype` (default: every dtype), then a per-pass summary of all."""
    all_rows = sweep_rows(data)
    rows = [r for r in all_rows if dtype is None or r["dtype"] == dtype] or all_rows
    lines = []
    if rows:
        index = _index(rows)
        seqlens = sorted({r["seqlen_q"] for r in rows})
        have_fc = any(r["impl"] == "flashcore" and r.get("tflops") for r in rows)
        if have_fc:
            lines.append("flashcore TFLOP/s  x ratio to the fastest other backend / to sdpa_flash")
        else:
            lines.append("flashcore has no results; the fastest backend per cell (TFLOP/s, name):")
        lines.append(f"{'pass':8s}{'dtype':6s}{'hd':>4s} {'mask':7s}|" + "".join(f"{seqlen_label(s):>15s}" for s in seqlens))
        for (pass_, dtype, hd, causal, groups), by_seqlen in index.items():
            entries = []
            for s in seqlens:
                c = compare(by_seqlen.get(s, {}))
                if have_fc:
                    if c["flashcore"] is None:
                        entries.append(f"{'-':>15s}")
                    else:
                        vb = f"{c['vs_best']:.2f}" if c["vs_best"] else "-"
                        vf = f"{c['vs_flash']:.2f}" if c["vs_flash"] else "-"
                        entries.append(f"{c['flashcore']:5.0f} {vb:>4s}/{vf:<4s}")
                else:
                    entries.append(f"{c['best']:5.0f} {c['best_impl'][5:]:9s}" if c["best"] else f"{'-':>15s}")
            mask = "causal" if causal else "full"
            mask = f"gqa{groups}" if groups > 1 else mask
            lines.append(f"{pass_:8s}{dtype:6s}{hd:4d} {mask:7s}|" + "".join(entries))
        fam = family_lines(all_rows)
        if fam:
            lines += [""] + fam
        for impl in IMPL_ORDER:
            for reason, n in _reasons(all_rows, impl)[:3]:
                lines.append(f"  {impl}: {n} blank: {reason[:160]}")
        lines.append("summary over all cells run:")
        lines += summary_lines(all_rows)
    lines += _latency_lines(latency_rows(data))
    lines += _memory_lines(data.get("memory", []))
    return "\n".join(lines)


def _latency_lines(rows):
    if not rows:
        return []
    r0 = rows[0]
    lines = ["", f"small-shape latency: B={r0['batch']} H={r0['heads']} S={r0['seqlen_q']} D={r0['head_dim']} "
                 f"{r0['dtype']} forward (microseconds; p50/p90: GPU time per call after an L2 flush and a "
                 f"GPU hold; flush-only: the same without the hold, where host jitter can land in a sample; "
                 f"wall: host time per call of back-to-back calls; via graph: CUDA-graph replay)",
             f"{'impl':16s}{'p50':>9s}{'p90':>9s}{'fo p50':>9s}{'fo p90':>9s}{'wall':>9s}  via"]

    def us(r, key):
        return f"{r[key] * 1e3:9.1f}" if r.get(key) is not None else f"{'-':>9s}"
    for r in rows:
        kern = f" [{r['kernels']}]" if r.get("kernels") else ""
        if r.get("ms") is None:
            lines.append(f"{r['impl']:16s}" + f"{'-':>9s}" * 5 + f"  {r.get('via', 'torch')}: {r['reason'][:120]}")
            continue
        via = r.get("via", "torch") + (f" ({r['dtype']})" if r["dtype"] != r0["dtype"] else "")
        lines.append(f"{r['impl']:16s}{us(r, 'ms')}{us(r, 'ms_p90')}{us(r, 'ms_flush_only')}"
                     f"{us(r, 'ms_p90_flush_only')}{us(r, 'ms_wall')}  {via}{kern}")
    return lines


def memory_table(rows):
    """{seqlen: {impl: row}} and the impls in order."""
    table = OrderedDict()
    impls = []
    for r in sorted(rows, key=lambda r: r["seqlen_q"]):
        table.setdefault(r["seqlen_q"], {})[r["impl"]] = r
        if r["impl"] not in impls:
            impls.append(r["impl"])
    return table, impls


def _memory_cell(r):
    if r is None:
        return "-"
    if r.get("peak_bytes") is not None:
        return f"{r['peak_bytes'] / 2**30:.3f}"
    return "OOM" if "out of memory" in (r.get("reason") or "") else "n/a"


def _memory_lines(rows):
    if not rows:
        return []
    table, impls = memory_table(rows)
    r0 = rows[0]
    lines = ["", f"peak memory of one forward (GiB, inputs included): B={r0['batch']} H={r0['heads']} "
                 f"D={r0['head_dim']} {r0['dtype']}",
             f"{'seqlen':>8s}" + "".join(f"{i:>12s}" for i in impls)]
    for s, by_impl in table.items():
        lines.append(f"{seqlen_label(s):>8s}" + "".join(f"{_memory_cell(by_impl.get(i)):>12s}" for i in impls))
    return lines


def markdown(data, plot_files=()):
    ctx = data.get("context", {})
    out = [f"# Benchmark run {data.get('run_name', '')}", ""]
    out.append(f"{ctx.get('device', '?')} ({ctx.get('sm_count', '?')} SMs, SM clock {ctx.get('smi_clocks_sm', '?')}"
               f" of max {ctx.get('smi_clocks_max_sm', '?')}, memory clock {ctx.get('smi_clocks_mem', '?')}), "
               f"driver {ctx.get('smi_driver_version', '?')}, torch {ctx.get('torch', '?')}, CUDA {ctx.get('cuda', '?')}, "
               f"cuDNN {ctx.get('cudnn', '?')}; commit {ctx.get('commit', '?')} ({ctx.get('commit_source', '?')}); "
               f"{ctx.get('time_utc', ctx.get('date', '?'))}; mode {ctx.get('mode', '?')}.")
    out += ["", f"Method: {data.get('method', '')}", ""]
    if ctx.get("flashcore"):
        out += [f"flashcore: {ctx['flashcore']}", ""]
    for restart in data.get("restarts", []):
        out.append(f"- worker restarted after {restart.get('exit')} in {restart.get('after')}: "
                   f"{restart.get('reason')}; disabled {restart.get('disabled')}")
    rows = sweep_rows(data)
    if rows:
        out += ["", "Summary:", "", "```"] + [line.strip() for line in summary_lines(rows)] + ["```"]
        index = _index(rows)
        groups = OrderedDict()
        for (pass_, dtype, hd, causal, kv), by_seqlen in index.items():
            groups.setdefault((dtype, hd, pass_, kv > 1), []).append((causal, kv, by_seqlen))
        for (dtype, hd, pass_, gqa), parts in groups.items():
            title = f"{dtype}, head dim {hd}, {PASS_NAMES.get(pass_, pass_)}{', GQA' if gqa else ''} (TFLOP/s)"
            # Columns: the seqlens this table has (the GQA tables only their own).
            seqlens = sorted({s for _c, _kv, by_seqlen in parts for s in by_seqlen})
            header = "| mask | impl | " + " | ".join(seqlen_label(s) for s in seqlens) + " |"
            rule = "|---|---|" + "---|" * len(seqlens)
            out += ["", f"## {title}", "", header, rule]
            for causal, kv, by_seqlen in parts:
                mask = mask_label(causal, kv)
                impls = [i for i in IMPL_ORDER if any(i in c for c in by_seqlen.values())]
                impls += sorted({i for c in by_seqlen.values() for i in c} - set(impls))
                for impl in impls:
                    vals = []
                    for s in seqlens:
                        r = by_seqlen.get(s, {}).get(impl)
                        vals.append(f"{r['tflops']:.0f}" if r and r.get("tflops") else "-")
                    out.append(f"| {mask} | {impl} | " + " | ".join(vals) + " |")
                kern = [(by_seqlen.get(s, {}).get("flashcore") or {}).get("kernels") or "-" for s in seqlens]
                if any(k != "-" for k in kern):
                    out.append(f"| {mask} | flashcore ran | " + " | ".join(kern) + " |")
                for name, key in (("flashcore / fastest other", "vs_best"), ("flashcore / sdpa_cudnn", "vs_cudnn"),
                                  ("flashcore / sdpa_flash", "vs_flash"), ("sm90 / sdpa_cudnn", "sm90_vs_cudnn"),
                                  ("sm80 / sdpa_cudnn", "sm80_vs_cudnn"),
                                  ("sm90 / cutlass_ex88", "sm90_vs_ex88"),
                                  ("deterministic / sdpa_cudnn", "det_vs_cudnn"),
                                  ("deterministic / flashcore", "det_vs_default")):
                    ratios = []
                    for s in seqlens:
                        c = compare(by_seqlen.get(s, {}))
                        ratios.append(f"{c[key]:.2f}" if c[key] else "-")
                    if key == "vs_best" or any(r != "-" for r in ratios):
                        out.append(f"| {mask} | {name} | " + " | ".join(ratios) + " |")
                notes = sorted({r.get("note") for c in by_seqlen.values() for r in c.values() if r.get("note")})
                for note in notes:
                    out.append(f"| {mask} | note | {note} |" + " |" * (len(seqlens) - 1))
        out += family_markdown(rows)
        out += ["", "Blank cells and why:", ""]
        for impl in sorted({r["impl"] for r in rows}):
            for reason, n in _reasons(rows, impl):
                out.append(f"- {impl} ({n}): {reason}")
        suspect = [r for r in rows if r.get("check") == "suspect"]
        for r in suspect:
            out.append(f"- SUSPECT {r['impl']} output: {r['dtype']} d{r['head_dim']} "
                       f"{'causal' if r['causal'] else 'full'} S={r['seqlen_q']}: max |diff| vs SDPA "
                       f"{r.get('max_abs_diff_vs_sdpa')} {r.get('check_note', '')}")
    lat = _latency_lines(latency_rows(data))
    mem = _memory_lines(data.get("memory", []))
    if lat:
        out += ["", "## Small-shape latency", "", "```"] + lat[1:] + ["```"]
    if mem:
        out += ["", "## Peak memory", "", "```"] + mem[1:] + ["```"]
    if plot_files:
        shown = [f for f in plot_files if os.path.basename(f).startswith(("sweep_", "memory", "latency"))]
        panels = [f for f in plot_files if f not in shown]
        out += ["", "## Charts", ""] + [f"![{os.path.basename(f)}]({f})" for f in shown]
        if panels:
            out += ["", "One chart per head dim, mask and pass: " + ", ".join(
                f"[{os.path.splitext(os.path.basename(f))[0]}]({f})" for f in panels)]
    return "\n".join(out) + "\n"
