"""Command-line options shared by the supervisor (bench/bench.py) and the worker it starts."""
import argparse
import os

from . import plan

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _int_list(text):
    """'512,1k,2k' -> [512, 1024, 2048]."""
    values = []
    for item in text.split(","):
        item = item.strip().lower()
        if not item:
            continue
        values.append(int(float(item[:-1]) * 1024) if item.endswith("k") else int(item))
    return values


def _str_list(text):
    return [t.strip() for t in text.split(",") if t.strip()]


def parser():
    p = argparse.ArgumentParser(
        prog="bench/bench.py",
        description="flashcore vs PyTorch SDPA backends: TFLOP/s sweep, small-shape latency, memory, plots.")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: bf16, head dim 128, seqlen 1k and 4k, causal and not, fwd and bwd, "
                        "flashcore + sdpa_flash + sdpa_cudnn (under a minute)")
    p.add_argument("--hopper", action="store_true",
                   help="issue 14's benchmark: flashcore (auto, sm80, sm90), sdpa_cudnn, sdpa_flash and "
                        "cutlass_ex88, forward, bf16 and fp16, head dims 64/128/256, seqlen 512..16k, causal and "
                        "not, plus GQA 4:1 and 8:1 causal rows at 4k and 8k")
    p.add_argument("--dry-run", action="store_true", help="print the plan and the time estimate; touch no GPU")
    out = p.add_argument_group("output")
    out.add_argument("--out-dir", default=os.path.join(REPO_ROOT, "bench", "results"),
                     help="where the JSON and markdown go (default bench/results)")
    out.add_argument("--flat", action="store_true",
                     help="write every file (JSON, markdown, PNGs) directly into --out-dir, e.g. $OUT on the device")
    out.add_argument("--run-name", help="default <device>_<date>_<commit>")
    out.add_argument("--plots", choices=["combined", "panels", "both", "none"],
                     help="combined: one grid PNG per pass; panels: one PNG per head dim x mask x pass "
                          "(default: combined with --flat, else both)")
    out.add_argument("--plot-dtype", default="bf16")
    out.add_argument("--commit", help="commit to record (default: $FLASHCORE_COMMIT/$COMMIT, then git, then ./COMMIT)")
    sweep = p.add_argument_group("sweep (defaults: the full sweep, or --quick's subset)")
    sweep.add_argument("--impls", type=_str_list, help=f"subset of {','.join(plan.SWEEP_IMPLS)}")
    sweep.add_argument("--dtypes", type=_str_list)
    sweep.add_argument("--head-dims", type=_int_list)
    sweep.add_argument("--seqlens", type=_int_list)
    sweep.add_argument("--passes", type=_str_list, help="subset of fwd,bwd,fwd_bwd")
    sweep.add_argument("--causal", choices=["both", "yes", "no"], default="both")
    sweep.add_argument("--tokens", type=int, default=16384, help="batch * seqlen")
    sweep.add_argument("--hidden", type=int, default=2048, help="heads * head_dim")
    sweep.add_argument("--math-max-seqlen", type=int, default=2048)
    sweep.add_argument("--sdpa-layout", choices=["bhsd", "bshd"], default="bhsd",
                       help="bhsd: SDPA gets contiguous (B,H,S,D) tensors (as the anchors); bshd: "
                            "(B,S,H,D) tensors passed as .transpose(1,2) views, as a flash_attn user would")
    sweep.add_argument("--no-check", action="store_true",
                       help="skip comparing flashcore's forward output with SDPA's on each shape")
    sweep.add_argument("--gqa-ratios", type=_int_list,
                       help="GQA rows: heads / heads_kv ratios (default 4,8 for the full and --hopper runs, none "
                            "for --quick); 0 or an empty list: no GQA rows")
    sweep.add_argument("--gqa-seqlens", type=_int_list, default=list(plan.GQA_SEQLENS),
                       help="seqlens of the GQA rows (causal only; default 4k,8k; only those also in --seqlens)")
    ex88 = p.add_argument_group("CUTLASS example 88 (impl cutlass_ex88)")
    ex88.add_argument("--ex88", default=os.environ.get("EX88_BIN") or os.path.join(REPO_ROOT, ".carry", "ex88",
                                                                                    "88_hopper_fmha"),
                      help="the 88_hopper_fmha binary (default $EX88_BIN, else .carry/ex88/88_hopper_fmha; "
                           "build it with scripts/build_cutlass_ex88.sh)")
    ex88.add_argument("--ex88-iterations", type=int, default=0,
                      help="its --iterations (0: from --rep-ms and the expected time, 10 to 100)")
    ex88.add_argument("--ex88-timeout-s", type=float, default=60.0)
    timing = p.add_argument_group("timing")
    timing.add_argument("--warmup-ms", type=float, default=10.0)
    timing.add_argument("--rep-ms", type=float, default=40.0, help="target timed time per cell")
    timing.add_argument("--min-reps", type=int, default=5)
    timing.add_argument("--max-reps", type=int, default=100)
    timing.add_argument("--l2-flush-mb", type=int, default=256)
    timing.add_argument("--budget-s", type=float,
                        help="no new cell starts after this many seconds (default 45 quick, 450 full); "
                             "cells left are recorded as not run")
    timing.add_argument("--cell-timeout-s", type=float, help="a cell running longer is a hang (default 30 quick, 90 full)")
    timing.add_argument("--max-restarts", type=int, default=6,
                        help="worker restarts after fatal CUDA errors, crashes or hangs")
    extra = p.add_argument_group("latency table and memory comparison")
    extra.add_argument("--no-sweep", action="store_true")
    extra.add_argument("--no-latency", action="store_true")
    extra.add_argument("--no-graph", action="store_true", help="no CUDA-graph replay rows in the latency table")
    extra.add_argument("--no-memory", action="store_true")
    extra.add_argument("--cli", default=os.path.join(REPO_ROOT, "build", "sm90-sm90a", "tools", "flashcore"),
                       help="the flashcore C++ CLI, for the teaching-ladder rungs (default build/sm90-sm90a/tools/flashcore)")
    extra.add_argument("--ladder", type=_str_list, default=["naive", "algo1", "wmma"], help="rung names for --impl")
    extra.add_argument("--latency-runs", type=int, default=1000)
    extra.add_argument("--latency-warmup", type=int, default=50)
    extra.add_argument("--latency-hold-us", type=float, default=200.0,
                       help="GPU sleep after each latency sample's flush, so host jitter stays out of the sample")
    extra.add_argument("--cli-timeout-s", type=float, default=60.0)
    extra.add_argument("--memory-seqlens", type=_int_list)
    extra.add_argument("--memory-heads", type=int, default=16)
    extra.add_argument("--memory-head-dim", type=int, default=64)
    extra.add_argument("--memory-dtype", default="fp16")
    internal = p.add_argument_group("internal (the supervisor starts the worker with these)")
    internal.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    internal.add_argument("--journal", help=argparse.SUPPRESS)
    internal.add_argument("--t0", type=float, help=argparse.SUPPRESS)
    return p


def parse(argv=None):
    args = parser().parse_args(argv)
    if args.quick and args.hopper:
        parser().error("--quick and --hopper are separate presets; pick one")
    args.mode = "quick" if args.quick else "hopper" if args.hopper else "full"
    preset = plan.PRESETS[args.mode]
    args.impls = args.impls or list(preset["impls"])
    args.dtypes = args.dtypes or list(preset["dtypes"])
    args.head_dims = args.head_dims or list(preset["head_dims"])
    args.seqlens = args.seqlens or list(preset["seqlens"])
    args.passes = args.passes or list(preset["passes"])
    if args.gqa_ratios is None:
        args.gqa_ratios = list(preset["gqa_ratios"])
    args.gqa_ratios = [r for r in args.gqa_ratios if r > 1]
    args.causals = {"both": [False, True], "yes": [True], "no": [False]}[args.causal]
    args.memory_seqlens = args.memory_seqlens or list(
        plan.MEMORY_SEQLENS_QUICK if args.quick else plan.MEMORY_SEQLENS_FULL)
    if args.budget_s is None:
        args.budget_s = 45.0 if args.quick else 450.0
    if args.cell_timeout_s is None:
        args.cell_timeout_s = 30.0 if args.quick else 90.0
    if args.plots is None:
        args.plots = "combined" if args.flat else "both"
    bad = [i for i in args.impls if i not in plan.SWEEP_IMPLS]
    bad += [d for d in args.dtypes if d not in plan.DTYPES]
    bad += [p for p in args.passes if p not in plan.PASSES]
    if bad:
        parser().error(f"unknown values: {', '.join(map(str, bad))}")
    return args


def all_cells(args):
    cells = []
    if not args.no_latency:
        cells += plan.latency_cells(list(plan.LATENCY_IMPLS), args.ladder,
                                    () if args.no_graph else plan.LATENCY_GRAPH_IMPLS)
    if not args.no_memory:
        cells += plan.memory_cells(args.memory_seqlens, args.memory_heads, args.memory_head_dim, args.memory_dtype)
    if not args.no_sweep:
        # The plotted dtype first: a run cut short by its budget still has its charts.
        dtypes = sorted(args.dtypes, key=lambda d: d != args.plot_dtype)
        cells += plan.sweep_cells(args.impls, dtypes, args.head_dims, args.seqlens, args.causals, args.passes,
                                  args.tokens, args.hidden, args.math_max_seqlen)
        # GQA rows at --gqa-seqlens that are also in --seqlens (a run restricted to short seqlens has none).
        gqa_seqlens = [s for s in args.gqa_seqlens if s in args.seqlens]
        if args.gqa_ratios and gqa_seqlens and True in args.causals:
            cells += plan.gqa_cells(args.impls, dtypes, args.head_dims, args.gqa_ratios, gqa_seqlens,
                                    args.passes, args.tokens, args.hidden, args.math_max_seqlen)
    return cells
