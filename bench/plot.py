#!/usr/bin/env python3
"""Redraws a run's charts (and, with --report, its markdown report) from its JSON, or from the
journal a killed run left behind. Needs matplotlib, not torch or a GPU.

  python3 bench/plot.py bench/results/<run>.json [--out-dir DIR] [--dtype bf16] [--report R.md]

Charts go to bench/results/plots/<run>/ by default: one PNG per head dim x mask x pass, one grid
PNG per pass (sweep_<dtype>_<pass>.png), memory.png and latency.png."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flashbench import plots, report, results  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("results", help="a run's .json, or a bench-journal-*.jsonl")
    p.add_argument("--out-dir", help="default bench/results/plots/<run name>")
    p.add_argument("--dtype", default="bf16", help="the dtype charted")
    p.add_argument("--plots", choices=["combined", "panels", "both"], default="both")
    p.add_argument("--write-json", help="also write the results as JSON here (to recover a journal)")
    p.add_argument("--table", action="store_true", help="print the terminal table too")
    p.add_argument("--report", help="also write the markdown report here, its chart links relative to it")
    args = p.parse_args()
    data = results.load(args.results)
    name = data.get("run_name") or os.path.splitext(os.path.basename(args.results))[0]
    data.setdefault("run_name", name)
    if args.write_json:
        results.write(data, args.write_json)
    out_dir = args.out_dir or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "plots", name)
    written = plots.draw_all(data, out_dir, args.dtype, args.plots)
    for path in written:
        print(path)
    if args.report:
        base = os.path.dirname(os.path.abspath(args.report))
        with open(args.report, "w", encoding="utf-8") as f:
            f.write(report.markdown(data, [os.path.relpath(p, base) for p in written]))
        print(args.report)
    if args.table:
        print(report.terminal_table(data, args.dtype))
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
