"""The benchmark's entry: plans the run, starts the worker, restarts it after a fatal error, then
writes the JSON, the markdown report, the terminal table and the charts.

The worker runs every GPU measurement in one process. If it dies (a sticky CUDA error, a crash, a
hang), the cell in flight is recorded with the reason, its implementation is disabled for that
dtype and head dim (for all cells after three such failures), and a fresh worker carries on from the
journal. So one bad kernel costs its own cells and a few seconds, never the run.
"""
import os
import signal
import subprocess
import sys
import time

from . import context, ex88, journal, options, plots, report, results, worker
from .plan import estimate_seconds

GRACE_S = {"quick": 10.0, "full": 60.0, "hopper": 60.0}


class Stop(Exception):
    pass


def _on_signal(signum, _frame):
    raise Stop(f"signal {signum}")


def _describe_exit(rc):
    if rc is None:
        return "killed"
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return {worker.EXIT_FATAL: "fatal CUDA error", worker.EXIT_HANG: "hang"}.get(rc, f"exit code {rc}")


def _scope(cell, failures_of_impl):
    if failures_of_impl >= 3:
        return {"impl": cell.impl}
    if cell.suite == "sweep":
        return {"suite": "sweep", "impl": cell.impl, "dtype": cell.dtype, "head_dim": cell.head_dim}
    return {"suite": cell.suite, "impl": cell.impl}


def _settings(args):
    keys = ("mode", "impls", "dtypes", "head_dims", "seqlens", "passes", "causals", "gqa_ratios", "gqa_seqlens",
            "tokens", "hidden",
            "math_max_seqlen", "sdpa_layout", "warmup_ms", "rep_ms", "min_reps", "max_reps", "l2_flush_mb",
            "budget_s", "cell_timeout_s", "latency_runs", "latency_warmup", "latency_hold_us", "cli", "ladder",
            "memory_seqlens", "memory_heads", "memory_head_dim", "memory_dtype", "ex88", "ex88_iterations", "no_graph")
    return {k: getattr(args, k) for k in keys}


def _print_plan(args, cells):
    sweep = [c for c in cells if c.suite == "sweep"]
    to_run = [c for c in sweep if not c.skip]
    est = estimate_seconds(cells, args.warmup_ms, args.rep_ms, args.min_reps, args.max_reps)
    worker_est = est + 15.0 + 0.2 * sum(c.suite != "sweep" for c in cells)
    print(f"bench: {args.mode} run: {len(sweep)} sweep cells ({len(to_run)} to run, {len(sweep) - len(to_run)} "
          f"skipped by plan), {sum(c.suite == 'latency' for c in cells)} latency cells, "
          f"{sum(c.suite == 'memory' for c in cells)} memory cells; impls {','.join(args.impls)}; dtypes "
          f"{','.join(args.dtypes)}; head dims {args.head_dims}; seqlens {args.seqlens}; passes {','.join(args.passes)}",
          file=sys.stderr)
    gqa = [c for c in sweep if c.gqa]
    if gqa:
        print(f"bench: {len(gqa)} of the sweep cells are GQA (ratios {args.gqa_ratios}, causal, seqlens "
              f"{sorted({c.seqlen_q for c in gqa})})", file=sys.stderr)
    if "cutlass_ex88" in args.impls:
        print(f"bench: cutlass_ex88: {ex88.missing(args.ex88) or args.ex88}", file=sys.stderr)
    print(f"bench: estimated ~{worker_est:.0f} s on an H100 (no new cell after {args.budget_s:.0f} s)",
          file=sys.stderr, flush=True)


def _run_workers(args, argv, cells, journal_path, t0):
    """Runs workers until the plan is done, the restarts are spent or time is up. Returns
    (restarts, why the run stopped early or None, setup error or None)."""
    restarts, handled, failures = [], set(), {}
    hard_deadline = t0 + args.budget_s + GRACE_S[args.mode]
    by_key = {c.key: c for c in cells}
    cmd = [sys.executable, "-m", "flashbench", *argv, "--worker", "--journal", journal_path, "--t0", repr(t0)]
    env = dict(os.environ)
    bench_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = bench_dir + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    while True:
        proc = subprocess.Popen(cmd, env=env)
        try:
            rc = proc.wait(timeout=max(1.0, hard_deadline - time.time()))
        except subprocess.TimeoutExpired:
            _stop(proc)
            _blame_in_flight(journal_path, by_key, "killed: the run's hard time limit was reached")
            return restarts, "the run's hard time limit was reached", None
        except Stop:
            _stop(proc)
            _blame_in_flight(journal_path, by_key, "killed: the benchmark was interrupted")
            raise
        if rc == 0:
            return restarts, None, None
        state = journal.State(journal.read(journal_path))
        if rc == worker.EXIT_SETUP:
            err = state.contexts[-1].get("error") if state.contexts else "worker set-up failed"
            return restarts, err, err
        key = None
        if state.fatal and state.fatal["key"] not in handled:
            key, reason = state.fatal["key"], state.fatal["reason"]
        elif state.in_flight:
            key, reason = state.in_flight, f"worker died ({_describe_exit(rc)}) while running this cell"
            _blame_in_flight(journal_path, by_key, reason)
        if key is None or key not in by_key:
            return restarts, f"the worker stopped ({_describe_exit(rc)}) outside any cell", None
        handled.add(key)
        cell = by_key[key]
        failures[cell.impl] = failures.get(cell.impl, 0) + 1
        scope = _scope(cell, failures[cell.impl])
        jr = journal.Journal(journal_path)
        jr.write("disable", scope=scope, reason=f"not run: disabled after a fatal failure in {cell.describe()}: "
                                                f"{reason[:300]}")
        jr.close()
        restarts.append({"after": cell.describe(), "exit": _describe_exit(rc), "reason": reason[:300],
                         "disabled": scope})
        print(f"bench: worker stopped ({_describe_exit(rc)}) in {cell.describe()}; disabled {scope}; restarting",
              file=sys.stderr, flush=True)
        if len(restarts) > args.max_restarts:
            return restarts, f"more than {args.max_restarts} worker restarts", None


def _stop(proc):
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _blame_in_flight(journal_path, by_key, reason):
    state = journal.State(journal.read(journal_path))
    cell = by_key.get(state.in_flight or "")
    if cell is not None:
        jr = journal.Journal(journal_path)
        jr.write("row", key=cell.key, row=cell.row(reason=reason))
        jr.close()


def _finish(args, cells, journal_path, restarts, stopped, t0, with_plots=True):
    state = journal.State(journal.read(journal_path))
    data = results.assemble(cells, state, _settings(args), restarts, stopped)
    ctx = data["context"]
    ctx.setdefault("mode", args.mode)
    ctx["wall_s"] = round(time.time() - t0, 1)
    name = args.run_name or context.run_name(ctx)
    data["run_name"] = name
    os.makedirs(args.out_dir, exist_ok=True)
    json_path = os.path.join(args.out_dir, f"{name}.json")
    results.write(data, json_path)
    plot_dir = args.out_dir if args.flat else os.path.join(args.out_dir, "plots", name)
    written, plot_errors = [], []
    if with_plots and args.plots != "none":
        try:
            written = plots.draw_all(data, plot_dir, args.plot_dtype, args.plots, plot_errors)
        except Exception as e:  # e.g. no matplotlib: charts can be redrawn later with bench/plot.py
            plot_errors.append(f"{type(e).__name__}: {e}")
    md_path = os.path.join(args.out_dir, f"{name}.md")
    rel = [os.path.relpath(p, args.out_dir) for p in written]
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(report.markdown(data, rel))
    print(report.terminal_table(data, args.plot_dtype))
    print(f"\nbench: {name}: {ctx['wall_s']:.0f} s; JSON {json_path}; report {md_path}")
    if written:
        print(f"bench: {len(written)} charts in {plot_dir}")
    if plot_errors:
        print(f"bench: charts not drawn ({'; '.join(plot_errors)}); redraw with: python3 bench/plot.py {json_path}")
    if stopped:
        print(f"bench: stopped early: {stopped}")
    return json_path


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = options.parse(argv)
    if args.worker:
        return worker.main(args)
    t0 = time.time()
    cells = options.all_cells(args)
    _print_plan(args, cells)
    if args.dry_run:
        return 0
    os.makedirs(args.out_dir, exist_ok=True)
    journal_path = os.path.join(args.out_dir, f"bench-journal-{os.getpid()}.jsonl")
    signal.signal(signal.SIGTERM, _on_signal)
    stopped, restarts = None, []
    try:
        restarts, stopped, setup_error = _run_workers(args, argv, cells, journal_path, t0)
    except (Stop, KeyboardInterrupt) as e:
        _finish(args, cells, journal_path, restarts, f"interrupted ({e or 'Ctrl-C'})", t0, with_plots=False)
        return 130
    if setup_error:
        print(f"bench: cannot run: {setup_error}", file=sys.stderr)
        os.remove(journal_path)
        return 2
    _finish(args, cells, journal_path, restarts, stopped, t0)
    os.remove(journal_path)
    return 0
