"""Charts in the style of FlashAttention's README: TFLOP/s bars grouped by sequence length, one
group member per implementation, the value on each bar. Also peak memory and small-shape latency.

Layouts: `panels` writes one PNG per head dim x mask x pass; `combined` one grid PNG per pass
(rows: mask, columns: head dim), which is what the README shows.
"""
import os

from .report import PASS_NAMES, memory_table, seqlen_label
from .results import latency_rows, sweep_rows

COLORS = {"flashcore": "#d62728", "flashcore_cli": "#ff9896", "flashcore_sm80": "#e377c2",
          "flashcore_sm90": "#8b0000", "flashcore_det": "#ffbb78", "sdpa_flash": "#1f77b4", "sdpa_cudnn": "#2ca02c",
          "sdpa_efficient": "#ff7f0e", "sdpa_math": "#7f7f7f", "standard": "#9467bd", "cutlass_ex88": "#17becf"}
# Colours for names not above (the ladder's rungs), in order of appearance.
SPARE_COLORS = ("#8c564b", "#bcbd22", "#c49c94", "#dbdb8d", "#9edae5", "#c5b0d5")
LABELS = {"flashcore": "flashcore (auto)", "flashcore_sm80": "flashcore sm80", "flashcore_sm90": "flashcore sm90",
          "flashcore_det": "flashcore deterministic", "sdpa_flash": "SDPA flash (FA2)", "sdpa_cudnn": "SDPA cuDNN",
          "sdpa_efficient": "SDPA mem-efficient", "sdpa_math": "SDPA math",
          "standard": "standard attention (S, P materialised)", "cutlass_ex88": "CUTLASS ex88 (fp16)"}
IMPL_ORDER = ("flashcore", "flashcore_sm80", "flashcore_sm90", "flashcore_det", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient",
              "sdpa_math", "cutlass_ex88")


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _color(impl, i):
    return COLORS.get(impl, SPARE_COLORS[i % len(SPARE_COLORS)])


def _panel_data(rows, dtype, pass_, head_dim, causal):
    by_seqlen = {}
    for r in rows:
        if (r["dtype"], r["pass"], r["head_dim"], r["causal"]) == (dtype, pass_, head_dim, causal):
            by_seqlen.setdefault(r["seqlen_q"], {})[r["impl"]] = r
    return by_seqlen


def _impls_with_data(rows):
    present = {r["impl"] for r in rows if r.get("tflops")}
    return [i for i in IMPL_ORDER if i in present] + sorted(present - set(IMPL_ORDER))


def draw_panel(ax, by_seqlen, impls, title, label_size=7):
    seqlens = sorted(by_seqlen)
    shown = [i for i in impls if any((by_seqlen[s].get(i) or {}).get("tflops") for s in seqlens)]
    width = 0.8 / max(1, len(shown))
    top = 0.0
    for j, impl in enumerate(shown):
        xs, ys = [], []
        for i, s in enumerate(seqlens):
            value = (by_seqlen[s].get(impl) or {}).get("tflops")
            if value:
                xs.append(i + (j - (len(shown) - 1) / 2) * width)
                ys.append(value)
        bars = ax.bar(xs, ys, width * 0.92, label=LABELS.get(impl, impl), color=_color(impl, j))
        ax.bar_label(bars, labels=[f"{y:.0f}" for y in ys], fontsize=label_size, padding=1.5,
                     rotation=90 if len(shown) > 3 else 0)
        top = max([top] + ys)
    ax.set_xticks(range(len(seqlens)), [seqlen_label(s) for s in seqlens])
    ax.set_xlabel("Sequence length")
    ax.set_ylabel("Speed (TFLOP/s)")
    ax.set_title(title, fontsize=10)
    ax.set_ylim(0, top * (1.25 if len(shown) > 3 else 1.15) if top else 1)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    if not shown:
        ax.text(0.5, 0.5, "no results", ha="center", va="center", transform=ax.transAxes)


def _device_label(data):
    ctx = data.get("context", {})
    commit = str(ctx.get("commit", "?"))[:7]
    return f"{ctx.get('device', ctx.get('smi_name', 'GPU'))}, commit {commit}"


def _panel_title(pass_, head_dim, causal):
    return f"{PASS_NAMES.get(pass_, pass_).capitalize()}, head dim {head_dim}, {'causal' if causal else 'no mask'}"


def sweep_charts(data, out_dir, dtype, layout):
    """PNG files written (paths)."""
    # MHA rows only: the GQA rows (heads_kv < heads) share seqlens with them and are in the tables.
    rows = [r for r in sweep_rows(data) if r["dtype"] == dtype and (r.get("heads_kv") or r["heads"]) == r["heads"]]
    if not rows or layout == "none":
        return []
    plt = _pyplot()
    impls = _impls_with_data(rows)
    passes = [p for p in ("fwd", "bwd", "fwd_bwd") if any(r["pass"] == p for r in rows)]
    head_dims = sorted({r["head_dim"] for r in rows})
    causals = sorted({r["causal"] for r in rows})
    written = []
    for pass_ in passes:
        if layout in ("panels", "both"):
            for hd in head_dims:
                for causal in causals:
                    fig, ax = plt.subplots(figsize=(9, 4.8))
                    draw_panel(ax, _panel_data(rows, dtype, pass_, hd, causal), impls,
                               f"{_panel_title(pass_, hd, causal)} ({dtype}, {_device_label(data)})", label_size=8)
                    ax.legend(fontsize=8, loc="upper left")
                    fig.tight_layout()
                    path = os.path.join(out_dir, f"{dtype}_{pass_}_hd{hd}_{'causal' if causal else 'full'}.png")
                    fig.savefig(path, dpi=110)
                    plt.close(fig)
                    written.append(path)
        if layout in ("combined", "both"):
            fig, axes = plt.subplots(len(causals), len(head_dims), figsize=(6.4 * len(head_dims), 4.4 * len(causals)),
                                     squeeze=False)
            for ri, causal in enumerate(causals):
                for ci, hd in enumerate(head_dims):
                    draw_panel(axes[ri][ci], _panel_data(rows, dtype, pass_, hd, causal), impls,
                               _panel_title(pass_, hd, causal))
            handles = [plt.Rectangle((0, 0), 1, 1, color=_color(i, k)) for k, i in enumerate(impls)]
            fig.legend(handles, [LABELS.get(i, i) for i in impls], loc="upper center", ncol=len(impls),
                       bbox_to_anchor=(0.5, 0.955), frameon=False)
            fig.suptitle(f"Attention {PASS_NAMES.get(pass_, pass_)} speed, {dtype} ({_device_label(data)})",
                         fontsize=13)
            fig.tight_layout(rect=(0, 0, 1, 0.93))
            path = os.path.join(out_dir, f"sweep_{dtype}_{pass_}.png")
            fig.savefig(path, dpi=100)
            plt.close(fig)
            written.append(path)
    return written


def memory_chart(data, out_dir):
    rows = data.get("memory", [])
    if not rows:
        return []
    plt = _pyplot()
    table, impls = memory_table(rows)
    seqlens = list(table)
    fig, ax = plt.subplots(figsize=(8, 5))
    ceiling = data.get("context", {}).get("total_memory_gib")
    for k, impl in enumerate(impls):
        xs, ys, oom = [], [], []
        for s in seqlens:
            r = table[s].get(impl)
            if r and r.get("peak_bytes") is not None:
                xs.append(s)
                ys.append(r["peak_bytes"] / 2**30)
            elif r and "out of memory" in (r.get("reason") or ""):
                oom.append(s)
        color = _color(impl, k)
        ax.plot(xs, ys, marker="o", color=color, label=LABELS.get(impl, impl), zorder=4 if impl == "flashcore" else 2)
        for x, y in zip(xs, ys):
            ax.annotate(f"{y:.2f}" if y < 10 else f"{y:.0f}", (x, y), textcoords="offset points", xytext=(0, 6),
                        ha="center", fontsize=7, color=color)
        for x in oom:
            y = ceiling or max(ys or [1.0]) * 2
            ax.scatter([x], [y], marker="X", s=80, color=color)
            ax.annotate("OOM", (x, y), textcoords="offset points", xytext=(0, -14), ha="center", fontsize=8,
                        color=color)
    if ceiling:
        ax.axhline(ceiling, ls="--", color="black", lw=0.8)
        ax.annotate(f"device memory {ceiling:.0f} GiB", (seqlens[-1], ceiling), textcoords="offset points",
                    xytext=(0, 4), ha="right", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(seqlens, [seqlen_label(s) for s in seqlens])
    ax.set_xlabel("Sequence length")
    ax.set_ylabel("Peak device memory of one forward (GiB)")
    r0 = rows[0]
    ax.set_title(f"Peak memory, B={r0['batch']} H={r0['heads']} D={r0['head_dim']} {r0['dtype']} "
                 f"({_device_label(data)})", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path = os.path.join(out_dir, "memory.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def latency_chart(data, out_dir):
    rows = [r for r in latency_rows(data) if r.get("ms") is not None]
    if not rows:
        return []
    plt = _pyplot()
    rows = sorted(rows, key=lambda r: r["ms"], reverse=True)
    p50 = [r["ms"] * 1e3 for r in rows]
    p90 = [(r.get("ms_p90") or r["ms"]) * 1e3 for r in rows]
    labels = [r["impl"] + (f" ({r['dtype']})" if r["dtype"] != rows[0]["dtype"] and r.get("via") == "cli" else "")
              + (" [CLI]" if r.get("via") == "cli" else "") + (" [graph]" if r.get("via") == "graph" else "")
              for r in rows]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.5))
    colors = [_color(r["impl"], k) for k, r in enumerate(rows)]
    ax.barh(range(len(rows)), p50, xerr=[[0] * len(rows), [max(0.0, b - a) for a, b in zip(p50, p90)]], color=colors,
            capsize=3, hatch=[{"cli": "//", "graph": ".."}.get(r.get("via"), "") for r in rows])
    for i, (a, b) in enumerate(zip(p50, p90)):
        ax.text(b, i, f"  {a:.1f} / {b:.1f}", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), labels)
    # Linear unless the spread is too wide to read (a naive rung can be orders slower).
    if max(p90) / min(p50) > 30:
        ax.set_xscale("log")
        ax.set_xlim(min(p50) * 0.5, max(p90) * 4)
    else:
        ax.set_xlim(0, max(p90) * 1.35)
    ax.set_xlabel("Forward latency, microseconds (bar: p50, whisker: p90; //: timed by the C++ CLI; dots: CUDA-graph replay)",
                  fontsize=8)
    r0 = rows[0]
    ax.set_title(f"B={r0['batch']} H={r0['heads']} S={r0['seqlen_q']} D={r0['head_dim']} {r0['dtype']} "
                 f"({_device_label(data)})", fontsize=10)
    fig.tight_layout()
    path = os.path.join(out_dir, "latency.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def draw_all(data, out_dir, dtype="bf16", layout="both", errors=None):
    """Every chart; returns the files written. A chart that fails is skipped (its error appended to
    `errors` when given, else raised) so the others are still drawn."""
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for draw in (lambda: sweep_charts(data, out_dir, dtype, layout), lambda: memory_chart(data, out_dir),
                 lambda: latency_chart(data, out_dir)):
        try:
            written += draw()
        except Exception as e:  # one bad chart must not cost the rest
            if errors is None:
                raise
            errors.append(f"{type(e).__name__}: {e}")
    return written
