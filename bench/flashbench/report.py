"""Tables: a compact one for the terminal (flashcore's TFLOP/s and its ratios) and a full markdown
report beside the JSON."""
import os
from collections import Counter, OrderedDict

from .results import latency_rows, sweep_rows

PASS_NAMES = {"fwd": "forward", "bwd": "backward", "fwd_bwd": "forward + backward"}
IMPL_ORDER = ("flashcore", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "sdpa_math")


def seqlen_label(s):
    return f"{s // 1024}k" if s >= 1024 and s % 1024 == 0 else str(s)


def _index(rows):
    """{(pass, dtype, head_dim, causal): {seqlen: {impl: row}}}, in a stable order."""
    table = OrderedDict()
    order = {p: i for i, p in enumerate(("fwd", "bwd", "fwd_bwd"))}
    for r in sorted(rows, key=lambda r: (order.get(r["pass"], 9), r["dtype"] != "bf16", r["dtype"], r["head_dim"],
                                         r["causal"], r["seqlen_q"])):
        table.setdefault((r["pass"], r["dtype"], r["head_dim"], r["causal"]), OrderedDict()).setdefault(
            r["seqlen_q"], {})[r["impl"]] = r
    return table


def _best_other(cells):
    others = [(r["tflops"], impl) for impl, r in cells.items() if impl != "flashcore" and r.get("tflops")]
    return max(others) if others else (None, None)


def compare(cells):
    """flashcore's TFLOP/s, the fastest other backend (value, name), flashcore/best, flashcore/sdpa_flash."""
    fc = (cells.get("flashcore") or {}).get("tflops")
    best, best_impl = _best_other(cells)
    fa = (cells.get("sdpa_flash") or {}).get("tflops")
    return {"flashcore": fc, "best": best, "best_impl": best_impl,
            "vs_best": fc / best if fc and best else None, "vs_flash": fc / fa if fc and fa else None}


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
    """Per dtype and pass: flashcore's geometric-mean ratio to the fastest other backend and to sdpa_flash."""
    lines = []
    for (pass_, dtype), cells in _by_pass_dtype(rows).items():
        comps = [compare(c) for c in cells]
        n = sum(1 for c in comps if c["flashcore"])
        gb, gf = _geomean([c["vs_best"] for c in comps]), _geomean([c["vs_flash"] for c in comps])
        lines.append(f"  {dtype} {pass_:8s}: flashcore ran {n}/{len(comps)} cells; geometric-mean ratio to the "
                     f"fastest other {gb:.2f}, to sdpa_flash {gf:.2f}" if gb and gf else
                     f"  {dtype} {pass_:8s}: flashcore ran {n}/{len(comps)} cells")
    return lines


def _by_pass_dtype(rows):
    groups = OrderedDict()
    for (pass_, dtype, _hd, _causal), by_seqlen in _index(rows).items():
        groups.setdefault((pass_, dtype), []).extend(by_seqlen.values())
    return groups


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
        for (pass_, dtype, hd, causal), by_seqlen in index.items():
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
            lines.append(f"{pass_:8s}{dtype:6s}{hd:4d} {'causal' if causal else 'full':7s}|" + "".join(entries))
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
                 f"{r0['dtype']} forward (microseconds)",
             f"{'impl':16s}{'p50':>9s}{'p90':>9s}  via"]
    for r in rows:
        if r.get("ms") is None:
            lines.append(f"{r['impl']:16s}{'-':>9s}{'-':>9s}  {r.get('via', 'torch')}: {r['reason'][:120]}")
            continue
        p90 = f"{r['ms_p90'] * 1e3:9.1f}" if r.get("ms_p90") is not None else f"{'-':>9s}"
        via = r.get("via", "torch") + (f" ({r['dtype']})" if r["dtype"] != r0["dtype"] else "")
        lines.append(f"{r['impl']:16s}{r['ms'] * 1e3:9.1f}{p90}  {via}")
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
        seqlens = sorted({r["seqlen_q"] for r in rows})
        header = "| mask | impl | " + " | ".join(seqlen_label(s) for s in seqlens) + " |"
        rule = "|---|---|" + "---|" * len(seqlens)
        index = _index(rows)
        groups = OrderedDict()
        for (pass_, dtype, hd, causal), by_seqlen in index.items():
            groups.setdefault((dtype, hd, pass_), []).append((causal, by_seqlen))
        for (dtype, hd, pass_), parts in groups.items():
            out += ["", f"## {dtype}, head dim {hd}, {PASS_NAMES.get(pass_, pass_)} (TFLOP/s)", "", header, rule]
            for causal, by_seqlen in parts:
                impls = [i for i in IMPL_ORDER if any(i in c for c in by_seqlen.values())]
                impls += sorted({i for c in by_seqlen.values() for i in c} - set(impls))
                for impl in impls:
                    vals = []
                    for s in seqlens:
                        r = by_seqlen.get(s, {}).get(impl)
                        vals.append(f"{r['tflops']:.0f}" if r and r.get("tflops") else "-")
                    out.append(f"| {'causal' if causal else 'full'} | {impl} | " + " | ".join(vals) + " |")
                ratios = []
                for s in seqlens:
                    c = compare(by_seqlen.get(s, {}))
                    ratios.append(f"{c['vs_best']:.2f}" if c["vs_best"] else "-")
                out.append(f"| {'causal' if causal else 'full'} | flashcore / fastest other | " + " | ".join(ratios) + " |")
        out += ["", "Blank cells and why:", ""]
        for impl in sorted({r["impl"] for r in rows}):
            for reason, n in _reasons(rows, impl):
                out.append(f"- {impl} ({n}): {reason}")
        suspect = [r for r in rows if r.get("check") == "suspect"]
        for r in suspect:
            out.append(f"- SUSPECT flashcore output: {r['dtype']} d{r['head_dim']} "
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
