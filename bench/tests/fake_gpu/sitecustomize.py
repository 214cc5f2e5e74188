"""Replaces the worker's GPU measurements with synthetic ones when FLASHBENCH_FAKE is set, and
injects failures into cells whose key contains every '&'-separated part of
FAKE_FATAL (sticky CUDA error), FAKE_SEGV (crash), FAKE_HANG (hang), FAKE_RAISE (ordinary error) or
FAKE_OOM (out of memory). A stand-in `flashcore` module is installed too. Only for bench/tests/test_orchestration.py.

Kernel families: flashcore rows get `kernels` from what FLASHCORE_KERNELS says inside the cell
(families.forced, the real code), so a leak between impls shows; the forced sm90 family has no
backward (NotImplementedError, as the library says). cutlass_ex88 cells run the real ex88.measure
on whatever binary --ex88 names (the tests give a shell script that prints example 88's output)."""
import os
import signal
import time

if os.environ.get("FLASHBENCH_FAKE"):
    import sys
    import types

    from flashbench import ex88, families, ladder_cli, worker

    # A flashcore package whose function is never called (the measurements are faked).
    sys.modules.setdefault("flashcore", types.SimpleNamespace(flash_attn_func=lambda *a, **k: None,
                                                              __file__="<fake flashcore>"))

    def _matches(var, key):
        pattern = os.environ.get(var)
        return bool(pattern) and all(part in key for part in pattern.split("&"))

    def fake_measure(self, cell):
        key = cell.key
        if _matches("FAKE_FATAL", key):
            worker.Runner._context_healthy = lambda self: False
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        if _matches("FAKE_SEGV", key):
            os.kill(os.getpid(), signal.SIGSEGV)
        if _matches("FAKE_HANG", key):
            time.sleep(1000)
        if _matches("FAKE_OOM", key):
            import torch
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 32.00 GiB.")
        if _matches("FAKE_RAISE", key):
            raise RuntimeError("No available kernel. Aborting execution.")
        if cell.via == "cli":
            return ladder_cli.measure(self.args.cli, cell, self.args.latency_runs, self.args.latency_warmup,
                                      self.args.cli_timeout_s)
        if cell.via == "binary":
            return ex88.measure(self.args.ex88, cell, self.args.rep_ms, self.args.ex88_iterations,
                                self.args.ex88_timeout_s)
        extra = {}
        if families.is_flashcore(cell.impl):
            before = os.environ.get(families.ENV)
            with families.forced(cell.impl):
                env = os.environ.get(families.ENV)
                if env == "sm90" and cell.pass_ != "fwd":
                    raise NotImplementedError("flashcore_backward: kernels: the sm90 family has no backward pass "
                                              "(forced by FLASHCORE_KERNELS=sm90)")
                fwd_family = "sm80" if env == "sm80" else "sm90"
                extra["kernels"] = families.label(cell.pass_, fwd_family, "sm80")
            if os.environ.get(families.ENV) != before:
                raise AssertionError(f"FLASHCORE_KERNELS leaked out of {cell.impl}'s cell")
        if cell.gqa and cell.impl.startswith("sdpa_"):
            extra["gqa_via"] = "enable_gqa" if cell.impl != "sdpa_cudnn" else "repeat_kv"
        if cell.suite == "memory":
            row = cell.row(peak_bytes=cell.seqlen_q ** 2 * 32 if cell.impl == "standard" else cell.seqlen_q * 8192,
                           extra_bytes=0, inputs_bytes=0)
            row["reason"] = None
            return row
        base = {"flashcore": 480, "flashcore_sm80": 330, "flashcore_sm90": 480, "sdpa_flash": 300, "sdpa_cudnn": 450,
                "sdpa_efficient": 120, "sdpa_math": 25}
        tflops = base[cell.impl] * (1 - 0.5 / (cell.seqlen_q / 512) ** 0.5) * (0.75 if cell.causal else 1.0)
        ms = cell.flops() / (tflops * 1e9)
        if cell.suite == "latency":
            graph = 0.004 if cell.via == "graph" else 0.0
            return cell.row(ms=ms + 0.01 - graph, ms_p90=ms + 0.012 - graph, runs=self.args.latency_runs,
                            ms_wall=ms + 0.03 - 4 * graph, **extra)
        return cell.row(ms=ms, reps=20, **extra)

    worker.Runner._measure = fake_measure
