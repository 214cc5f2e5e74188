"""Tests of the benchmark's logic that need no GPU: FLOPs, the plan, the CLI and ncu parsers, the
tables and charts, and the worker/supervisor restart machinery (with a stand-in torch).

    python3 -m unittest discover -s bench/tests -v
"""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, BENCH)

from flashbench import flops, ladder_cli, ncu, options, plan, report  # noqa: E402

try:
    import matplotlib  # noqa: F401
    HAVE_MPL = True
except ImportError:
    HAVE_MPL = False


class FlopsTest(unittest.TestCase):
    def test_forward_backward_causal(self):
        f = flops.attention_flops(2, 16, 1024, 1024, 128, False, "fwd")
        self.assertEqual(f, 4 * 2 * 16 * 1024 * 1024 * 128)
        self.assertEqual(flops.attention_flops(2, 16, 1024, 1024, 128, True, "fwd"), f / 2)
        self.assertEqual(flops.attention_flops(2, 16, 1024, 1024, 128, False, "bwd"), 2.5 * f)
        self.assertEqual(flops.attention_flops(2, 16, 1024, 1024, 128, False, "fwd_bwd"), 3.5 * f)
        self.assertAlmostEqual(flops.tflops(1e12, 1.0), 1000.0)
        self.assertIsNone(flops.tflops(1e12, None))


class PlanTest(unittest.TestCase):
    def test_full_sweep(self):
        args = options.parse([])
        cells = [c for c in options.all_cells(args) if c.suite == "sweep"]
        # 5 impls x 3 passes x 2 dtypes x 3 head dims x 2 masks x 6 seqlens
        self.assertEqual(len(cells), 5 * 3 * 2 * 3 * 2 * 6)
        skipped = [c for c in cells if c.skip]
        self.assertTrue(all(c.impl == "sdpa_math" and c.seqlen_q > 2048 for c in skipped))
        self.assertEqual(len(skipped), 3 * 2 * 3 * 2 * 3)
        self.assertTrue(all(c.batch * c.seqlen_q == 16384 and c.heads * c.head_dim == 2048 for c in cells))
        self.assertEqual(len({c.key for c in options.all_cells(args)}), len(options.all_cells(args)))
        self.assertEqual(cells[0].dtype, "bf16")  # the charted dtype first

    def test_quick(self):
        args = options.parse(["--quick"])
        cells = [c for c in options.all_cells(args) if c.suite == "sweep"]
        self.assertEqual(len(cells), 3 * 2 * 2 * 2)
        self.assertLess(plan.estimate_seconds(cells, args.warmup_ms, args.rep_ms, args.min_reps, args.max_reps), 40)

    def test_seqlen_parsing(self):
        self.assertEqual(options.parse(["--seqlens", "512,1k,16k"]).seqlens, [512, 1024, 16384])


class LadderCliTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.cli = os.path.join(self.dir, "flashcore")
        with open(self.cli, "w") as f:
            f.write(textwrap.dedent("""\
                #!/bin/bash
                impl=flashcore; dtype=fp16
                while [ $# -gt 0 ]; do case "$1" in --impl) impl=$2; shift;; --dtype) dtype=$2; shift;; esac; shift; done
                if [ "$impl" = naive ] && [ "$dtype" != fp32 ]; then echo "error: naive runs in fp32" >&2; exit 2; fi
                if [ "$impl" = broken ]; then echo "not json"; exit 0; fi
                echo "log line"
                echo '{"impl": "'$impl'", "ms": 0.02, "ms_p90": 0.03}'
                """))
        os.chmod(self.cli, 0o755)
        self.cells = {c.impl: c for c in plan.latency_cells([], ["naive", "wmma", "broken"])}

    def test_parse_and_fp32_retry(self):
        row = ladder_cli.measure(self.cli, self.cells["wmma"], 10, 1, 30)
        self.assertEqual((row["ms"], row["ms_p90"], row["dtype"]), (0.02, 0.03, "fp16"))
        row = ladder_cli.measure(self.cli, self.cells["naive"], 10, 1, 30)
        self.assertEqual((row["ms"], row["dtype"]), (0.02, "fp32"))
        row = ladder_cli.measure(self.cli, self.cells["broken"], 10, 1, 30)
        self.assertIsNone(row["ms"])
        self.assertIn("no JSON", row["reason"])

    def test_missing_cli(self):
        row = ladder_cli.measure("/nonexistent/flashcore", self.cells["wmma"], 10, 1, 30)
        self.assertIsNone(row["tflops"])
        self.assertIn("not found", row["reason"])


class NcuParseTest(unittest.TestCase):
    CSV = textwrap.dedent('''\
        ==PROF== Connected to process
        "ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","gpu__time_duration.sum","launch__registers_per_thread","sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active","launch__shared_mem_per_block_dynamic","smsp__sass_inst_executed_op_local_ld.sum"
        "","","","","","","","usecond","register/thread","%","Kbyte","inst"
        "0","1","flashcore","h","void flashcore::sm90::Fwd<128>(Params)","1","7","512.5","168","61.5","180.2","0"
        "1","1","flashcore","h","void flashcore::sm90::Fwd<128>(Params)","1","7","510.5","168","62.5","180.2","0"
        ''')

    def test_summary(self):
        kernels = ncu.summarise(ncu.parse_raw_csv(self.CSV))
        self.assertEqual(len(kernels), 1)
        k = kernels[0]
        self.assertEqual((k["name"], k["launches"]), ("flashcore::sm90::Fwd", 2))
        self.assertAlmostEqual(k["duration_ns"], 511500.0)
        self.assertAlmostEqual(k["tensor_pipe_pct"], 62.0)
        self.assertAlmostEqual(k["shared_mem_dynamic_bytes"], 180200.0)
        self.assertIs(k["local_memory_used"], False)
        self.assertIn("flashcore::sm90::Fwd", ncu.markdown({"kernels": kernels}))

    def test_garbage(self):
        self.assertEqual(ncu.parse_raw_csv("==ERROR== nothing"), [])


def synthetic_results():
    args = options.parse(["--impls", "flashcore,sdpa_flash,sdpa_cudnn", "--head-dims", "64,128",
                          "--seqlens", "512,1k,2k"])
    rows, mem = [], []
    for i, cell in enumerate(options.all_cells(args)):
        if cell.suite == "memory":
            r = cell.row(peak_bytes=None if cell.impl == "standard" and cell.seqlen_q >= 65536 else cell.seqlen_q * 1e4)
            r["reason"] = "out of memory: CUDA out of memory" if r["peak_bytes"] is None else None
            mem.append(r)
        elif cell.impl == "flashcore" and cell.head_dim == 128 and cell.pass_ == "bwd":
            rows.append(cell.row(reason="NotImplementedError: head_dim 128 backward"))
        else:
            rows.append(cell.row(ms=cell.flops() / (200e9 + 1e9 * (i % 50)), ms_p90=0.03))
    return {"context": {"device": "NVIDIA H100 80GB HBM3", "commit": "0123456789abcdef", "total_memory_gib": 79.2},
            "rows": rows, "memory": mem, "run_name": "test"}


class ReportTest(unittest.TestCase):
    def test_tables(self):
        data = synthetic_results()
        text = report.terminal_table(data, "bf16")
        self.assertIn("flashcore TFLOP/s", text)
        self.assertIn("NotImplementedError: head_dim 128 backward", text)
        self.assertIn("OOM", text)
        self.assertIn("geometric-mean", text)
        md = report.markdown(data, ["sweep_bf16_fwd.png"])
        self.assertIn("## bf16, head dim 64, forward (TFLOP/s)", md)
        self.assertIn("flashcore / fastest other", md)

    @unittest.skipUnless(HAVE_MPL, "matplotlib not installed")
    def test_plots(self):
        from flashbench import plots
        out = tempfile.mkdtemp()
        files = plots.draw_all(synthetic_results(), out, "bf16", "both")
        names = sorted(os.path.basename(f) for f in files)
        self.assertIn("sweep_bf16_fwd.png", names)
        self.assertIn("bf16_bwd_hd64_causal.png", names)
        self.assertIn("memory.png", names)
        self.assertIn("latency.png", names)
        self.assertTrue(all(os.path.getsize(f) > 10000 for f in files))


class OrchestrationTest(unittest.TestCase):
    """The supervisor and worker end to end, on a stand-in torch with injected failures."""

    def run_bench(self, extra_env, *argv):
        out = tempfile.mkdtemp()
        env = dict(os.environ, FLASHBENCH_FAKE="1", **extra_env)
        env["PYTHONPATH"] = os.pathsep.join([os.path.join(HERE, "fake_gpu"), BENCH])
        cmd = [sys.executable, os.path.join(BENCH, "bench.py"), "--out-dir", out, "--flat", "--plots", "none",
               "--cli", "/nonexistent", "--commit", "abcdef1", *argv]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        jsons = [f for f in os.listdir(out) if f.endswith(".json")]
        self.assertEqual(len(jsons), 1, p.stdout + p.stderr)
        with open(os.path.join(out, jsons[0])) as f:
            return p, json.load(f), sorted(os.listdir(out))

    def test_failures_are_rows_and_restarts(self):
        p, data, files = self.run_bench(
            {"FAKE_FATAL": "sweep|flashcore|bwd|bf16|d64", "FAKE_SEGV": "sweep|sdpa_cudnn|fwd|bf16|d128&q1024",
             "FAKE_HANG": "sweep|sdpa_flash|bwd|bf16|d128&q2048", "FAKE_RAISE": "latency|sdpa_math",
             "FAKE_OOM": "memory|standard&q65536"},
            "--impls", "flashcore,sdpa_flash,sdpa_cudnn", "--head-dims", "64,128", "--seqlens", "512,1k,2k",
            "--passes", "fwd,bwd", "--dtypes", "bf16", "--cell-timeout-s", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(files, ["h100-80gb-hbm3_%s_abcdef1.json" % data["context"]["date"],
                                 "h100-80gb-hbm3_%s_abcdef1.md" % data["context"]["date"]])
        rows = {(r["suite"], r["impl"], r["pass"], r["head_dim"], r["causal"], r["seqlen_q"]): r for r in data["rows"]}
        self.assertEqual(len(data["rows"]), 3 * 2 * 2 * 2 * 3 + 9)
        self.assertEqual(len(data["restarts"]), 3)
        fatal = rows[("sweep", "flashcore", "bwd", 64, False, 512)]
        self.assertIn("illegal memory access", fatal["reason"])
        later = rows[("sweep", "flashcore", "fwd", 64, True, 2048)]
        self.assertIn("disabled after a fatal failure", later["reason"])
        self.assertIsNotNone(rows[("sweep", "flashcore", "fwd", 128, False, 512)]["ms"])
        self.assertIn("SIGSEGV", rows[("sweep", "sdpa_cudnn", "fwd", 128, False, 1024)]["reason"])
        self.assertIn("hang", rows[("sweep", "sdpa_flash", "bwd", 128, False, 2048)]["reason"])
        self.assertIn("No available kernel", rows[("latency", "sdpa_math", "fwd", 64, False, 512)]["reason"])
        self.assertIn("not found", rows[("latency", "naive", "fwd", 64, False, 512)]["reason"])
        oom = [m for m in data["memory"] if m["impl"] == "standard" and m["seqlen_q"] == 65536][0]
        self.assertIn("out of memory", oom["reason"])
        self.assertTrue(all(r["tflops"] is None or r["reason"] is None for r in data["rows"]))
        self.assertIn("flashcore TFLOP/s", p.stdout)

    def test_budget(self):
        p, data, _ = self.run_bench({"FAKE_HANG": "sweep|sdpa_flash|fwd|bf16|d64|causal&q1024"}, "--quick",
                                    "--head-dims", "64", "--budget-s", "1", "--cell-timeout-s", "100",
                                    "--no-latency", "--no-memory")
        reasons = {r["reason"] for r in data["rows"] if r["reason"]}
        self.assertTrue(any("hard time limit" in r or "budget" in r for r in reasons), reasons)


if __name__ == "__main__":
    unittest.main()
