"""The worker: runs every planned cell on the GPU in one process and journals each result.

A cell that raises becomes a row with its reason. When the GPU context itself is broken (a sticky
CUDA error such as an illegal address) or a cell hangs, the worker journals that and exits with
EXIT_FATAL / EXIT_HANG; the supervisor disables the culprit and starts a fresh worker, which skips
every cell already journaled.
"""
import gc
import os
import sys
import threading
import time
import zlib

from . import context, ex88, families, impls, journal, ladder_cli, memory, options, timing

EXIT_SETUP = 2
EXIT_FATAL = 75
EXIT_HANG = 76
# flashcore's forward is compared with SDPA's on each shape; beyond this fraction of the output's
# largest magnitude the row is marked "suspect" (a sanity check, not the project's correctness test).
SUSPECT_FRACTION = 0.05


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Watchdog(threading.Thread):
    """Ends the process when one cell runs too long (a hung kernel never returns to Python)."""

    def __init__(self, jr):
        super().__init__(daemon=True)
        self._journal = jr
        self._armed = None  # (cell, started, limit)

    def arm(self, cell, limit_s):
        self._armed = (cell, time.monotonic(), limit_s)

    def disarm(self):
        self._armed = None

    def run(self):
        while True:
            time.sleep(0.5)
            armed = self._armed
            if armed and time.monotonic() - armed[1] > armed[2]:
                cell, _, limit = armed
                reason = f"hang: still running after {limit:.0f} s"
                self._journal.write("row", key=cell.key, row=cell.row(reason=reason))
                self._journal.write("fatal", key=cell.key, reason=reason)
                log(f"!! {cell.describe()}: {reason}; exiting for a restart")
                os._exit(EXIT_HANG)


class Runner:
    def __init__(self, torch, args, jr, state):
        self.torch, self.args, self.journal, self.state = torch, args, jr, state
        self.flash_attn_func, self.flashcore_reason, self.flashcore_path = impls.load_flashcore()
        self.selector = families.Selector() if self.flash_attn_func is not None else None
        self.flush = timing.L2Flusher(torch, args.l2_flush_mb)
        self.hold = None  # timing.GpuHold, made at the first latency cell
        self.watchdog = Watchdog(jr)
        self.watchdog.start()
        self.inputs = None
        self.inputs_key = None
        self.reference = None  # SDPA's forward output for the current shape, for flashcore's check
        self._causal = False
        self._budget_announced = False

    # ---- one cell ----
    def run(self, cell, index, total):
        if cell.key in self.state.rows:
            return
        reason = cell.skip or self.state.disabled_reason(cell) or self._unavailable(cell)
        over_budget = reason is None and time.time() - self.args.t0 > self.args.budget_s
        if over_budget:
            reason = f"not run: the run's time budget (--budget-s {self.args.budget_s:.0f}) was spent"
            if not self._budget_announced:
                log(f"worker: time budget of {self.args.budget_s:.0f} s spent: the remaining cells are recorded "
                    f"as not run")
                self._budget_announced = True
        if reason is not None:
            # Skips planned up front or forced by the budget are recorded without a progress line each.
            self._record(cell, cell.row(reason=reason), index, total, quiet=over_budget or reason == cell.skip)
            return
        self.journal.write("start", key=cell.key)
        limit = self.args.cell_timeout_s + (self.args.cli_timeout_s * 2 if cell.via == "cli" else 0) + (
            self.args.ex88_timeout_s if cell.via == "binary" else 0)
        self.watchdog.arm(cell, limit)
        caught = []
        failure = None
        try:
            with impls.captured_warnings() as caught:
                row = self._measure(cell)
        except self.torch.cuda.OutOfMemoryError as e:
            failure = "oom"
            row = memory.oom_row(cell, e) if cell.suite == "memory" else cell.row(
                reason=f"out of memory: {impls.first_line(e, 200)}")
        except Exception as e:  # every failure is a row with its reason
            failure = "error"
            row = cell.row(reason=impls.explain(e, caught))
        finally:
            self.watchdog.disarm()
        # Released here, not inside `except`: the exception's traceback pins the cell's tensors.
        if failure:
            self._release()
        if failure == "error" and not self._context_healthy():
            self.journal.write("row", key=cell.key, row=row)
            self.journal.write("fatal", key=cell.key, reason=row["reason"])
            log(f"!! {cell.describe()}: {row['reason']}\n!! the CUDA context is unusable; exiting for a restart")
            os._exit(EXIT_FATAL)
        self._record(cell, row, index, total)

    def _unavailable(self, cell):
        if families.is_flashcore(cell.impl) and self.flash_attn_func is None:
            return self.flashcore_reason
        return None

    def _record(self, cell, row, index, total, quiet=False):
        self.journal.write("row", key=cell.key, row=row)
        self.state.rows[cell.key] = row
        if quiet:
            return
        elapsed = time.time() - self.args.t0
        if row.get("ms") is not None:
            what = f"{row['ms']:.4f} ms"
            if cell.suite == "latency" and row.get("ms_p90") is not None:
                what += f" (p90 {row['ms_p90']:.4f})"
            what += f"  {row['tflops']:.1f} TFLOP/s"
            if row.get("check") == "suspect":
                what += f"  SUSPECT: max |diff| vs SDPA {row.get('max_abs_diff_vs_sdpa')} {row.get('check_note', '')}"
            if row.get("kernels"):
                what += f"  [{row['kernels']}]"
            if row.get("gqa_via"):
                what += f"  (GQA via {row['gqa_via']})"
        elif row.get("peak_bytes") is not None:
            what = f"peak {row['peak_bytes'] / 2**30:.3f} GiB"
        else:
            what = f"-- {row['reason']}"
        log(f"[{index + 1:4d}/{total}] {elapsed:5.0f}s  {cell.describe()}: {what}")

    # ---- measurements ----
    def _measure(self, cell):
        if cell.via == "cli":
            return ladder_cli.measure(self.args.cli, cell, self.args.latency_runs, self.args.latency_warmup,
                                      self.args.cli_timeout_s)
        if cell.via == "binary":
            return ex88.measure(self.args.ex88, cell, self.args.rep_ms, self.args.ex88_iterations,
                                self.args.ex88_timeout_s)
        if cell.suite == "memory":
            return memory.measure(self.torch, cell, self.flash_attn_func,
                                  impls.backend_context(self.torch, cell.impl))
        inputs = self._inputs_for(cell)
        torch = self.torch
        extra = {}
        # The family a flashcore impl forces (FLASHCORE_KERNELS) holds for this cell only, like the
        # SDPA backend restriction: the check, the family query and every timed call see it.
        with families.forced(cell.impl), impls.backend_context(torch, cell.impl):
            notes = {}
            forward, grad_inputs, dout = impls.forward_call(torch, cell.impl, inputs, cell.causal,
                                                            self.flash_attn_func, notes)
            extra.update(notes)
            if families.is_flashcore(cell.impl):
                extra.update(self.selector.row_fields(torch, cell.pass_, inputs.q, inputs.k, inputs.v, cell.causal))
                if cell.pass_ == "fwd" and not self.args.no_check:
                    extra.update(self._check(forward))
            run = impls.pass_call(torch, cell.pass_, forward, grad_inputs, dout)
            if cell.suite == "latency":
                graph = None
                if cell.via == "graph":
                    run, graph = timing.graph_replay(torch, run)
                # Flush then hold (timing.GpuHold): the call's GPU time whatever the host's jitter.
                # The flush-only samples (the method before session 12) are kept beside it.
                if self.hold is None:
                    self.hold = timing.GpuHold(torch, self.args.latency_hold_us)

                def flush_and_hold():
                    self.flush()
                    self.hold()
                runs, warmup = self.args.latency_runs, self.args.latency_warmup
                samples = timing.samples_ms(torch, run, flush_and_hold, fixed_reps=runs, fixed_warmup=warmup)
                flush_only = timing.samples_ms(torch, run, self.flush, fixed_reps=runs, fixed_warmup=warmup)
                wall = timing.wall_ms(torch, run, min(200, runs))
                del run, graph
                return cell.row(ms=timing.percentile(samples, 50), ms_p90=timing.percentile(samples, 90),
                                runs=len(samples), ms_wall=wall, hold_us=self.args.latency_hold_us,
                                ms_flush_only=timing.percentile(flush_only, 50),
                                ms_p90_flush_only=timing.percentile(flush_only, 90), **extra)
            a = self.args
            samples = timing.samples_ms(torch, run, self.flush, warmup_ms=a.warmup_ms, rep_ms=a.rep_ms,
                                        min_reps=a.min_reps, max_reps=a.max_reps)
            del run
        return cell.row(ms=timing.median(samples), reps=len(samples), **extra)

    def _check(self, forward):
        torch = self.torch
        if self.reference is None:
            with torch.no_grad():
                q, k, v = self.inputs.sdpa_q, self.inputs.sdpa_k, self.inputs.sdpa_v
                if q.shape[1] != k.shape[1]:  # GQA: the reference repeats K/V (any SDPA backend takes that)
                    groups = q.shape[1] // k.shape[1]
                    k, v = impls.repeat_kv(k, groups), impls.repeat_kv(v, groups)
                ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=self._causal)
                self.reference = ref.transpose(1, 2).float()
        with torch.no_grad():
            out = forward().float()
        if out.shape != self.reference.shape:
            return {"check": "suspect", "max_abs_diff_vs_sdpa": None,
                    "check_note": f"output shape {tuple(out.shape)}, expected {tuple(self.reference.shape)}"}
        if not bool(torch.isfinite(out).all().item()):
            return {"check": "suspect", "max_abs_diff_vs_sdpa": None, "check_note": "output has NaN or Inf"}
        diff = (out - self.reference).abs().max().item()
        scale = self.reference.abs().max().item()
        ok = diff <= SUSPECT_FRACTION * max(scale, 1e-6)
        return {"check": "ok" if ok else "suspect", "max_abs_diff_vs_sdpa": diff}

    def _inputs_for(self, cell):
        key = (cell.suite,) + cell.shape_key
        if key != self.inputs_key:
            self._release()
            seed = zlib.crc32(repr(key).encode())  # the same values in every process
            self.inputs = impls.ShapeInputs(self.torch, cell, self.args.sdpa_layout, seed)
            self.inputs_key = key
            self._causal = cell.causal
        return self.inputs

    def _release(self):
        self.inputs = None
        self.inputs_key = None
        self.reference = None
        gc.collect()
        try:
            self.torch.cuda.empty_cache()
        except Exception:  # a broken context is detected by _context_healthy
            pass

    def _context_healthy(self):
        try:
            self.torch.cuda.synchronize()
            return (self.torch.ones(1, device="cuda") + 1).item() == 2.0
        except Exception:
            return False


def main(args):
    jr = journal.Journal(args.journal)
    state = journal.State(journal.read(args.journal))
    ctx = context.base_context(args.mode, args.commit)
    try:
        import torch
    except Exception as e:
        ctx["error"] = f"import torch failed: {e}"
        jr.write("context", context=ctx)
        log(f"worker: {ctx['error']}")
        return EXIT_SETUP
    if not torch.cuda.is_available():
        ctx["error"] = f"torch {torch.__version__} sees no CUDA device"
        jr.write("context", context=ctx)
        log(f"worker: {ctx['error']}")
        return EXIT_SETUP
    ctx.update(context.torch_context(torch))
    runner = Runner(torch, args, jr, state)
    ctx["flashcore"] = runner.flashcore_reason or f"imported from {runner.flashcore_path}"
    ctx["flashcore_kernels_env"] = os.environ.get(families.ENV)
    if runner.selector is not None and runner.selector.missing:
        ctx["flashcore_kernels_query"] = runner.selector.missing
    ctx["ex88"] = ex88.missing(args.ex88) or args.ex88
    ctx["ex88_build"] = ex88.build_info(args.ex88)
    ctx["cli"] = ladder_cli.cli_missing(args.cli) or args.cli
    jr.write("context", context=ctx)
    log(f"worker: {ctx['device']} ({ctx['sm_count']} SMs), torch {ctx['torch']}, CUDA {ctx['cuda']}, "
        f"cuDNN {ctx['cudnn']}, clocks sm {ctx.get('smi_clocks_sm')} / max {ctx.get('smi_clocks_max_sm')}")
    log(f"worker: flashcore: {ctx['flashcore']}")
    if state.rows:
        log(f"worker: resuming: {len(state.rows)} cells already recorded")
    cells = options.all_cells(args)
    for i, cell in enumerate(cells):
        runner.run(cell, i, len(cells))
    runner._release()
    jr.write("end", smi=context.nvidia_smi(str(getattr(torch.cuda.get_device_properties(0), "uuid", "")) or None))
    return 0
