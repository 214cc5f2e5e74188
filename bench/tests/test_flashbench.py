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

from flashbench import ex88, families, flops, ladder_cli, ncu, options, plan, report  # noqa: E402

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
        mha = [c for c in cells if not c.gqa]
        gqa = [c for c in cells if c.gqa]
        # (8 impls x 3 passes + flashcore_det x 2: bwd, fwd_bwd) x 2 dtypes x 3 head dims x 2 masks x 6 seqlens
        self.assertEqual(len(mha), (8 * 3 + 2) * 2 * 3 * 2 * 6)
        # GQA: the same impls and passes x 2 dtypes x 3 head dims x 2 ratios x 2 seqlens, causal only
        self.assertEqual(len(gqa), (8 * 3 + 2) * 2 * 3 * 2 * 2)
        self.assertFalse([c for c in cells if c.impl == "flashcore_det" and c.pass_ == "fwd"])
        self.assertTrue(all(c.causal and c.seqlen_q in (4096, 8192) for c in gqa))
        self.assertEqual({c.heads // c.kv_heads for c in gqa}, {4, 8})
        skipped = [c for c in mha if c.skip]
        self.assertTrue(all(c.impl == "sdpa_math" and c.seqlen_q > 2048 for c in skipped))
        self.assertEqual(len(skipped), 3 * 2 * 3 * 2 * 3)
        self.assertTrue(all(c.batch * c.seqlen_q == 16384 and c.heads * c.head_dim == 2048 for c in cells))
        self.assertEqual(len({c.key for c in options.all_cells(args)}), len(options.all_cells(args)))
        self.assertEqual(cells[0].dtype, "bf16")  # the charted dtype first
        self.assertTrue(all((c.via == "binary") == (c.impl == "cutlass_ex88") for c in cells))

    def test_quick(self):
        args = options.parse(["--quick"])
        cells = [c for c in options.all_cells(args) if c.suite == "sweep"]
        self.assertEqual(len(cells), 5 * 2 * 2 * 2)
        self.assertFalse(any(c.gqa for c in cells))
        self.assertLess(plan.estimate_seconds(cells, args.warmup_ms, args.rep_ms, args.min_reps, args.max_reps), 40)

    def test_hopper(self):
        """Issue 14's grid: both families, cuDNN, FA2, ex88; forward; MHA plus GQA 4:1/8:1 causal at 4k/8k."""
        args = options.parse(["--hopper"])
        cells = [c for c in options.all_cells(args) if c.suite == "sweep"]
        self.assertEqual(args.mode, "hopper")
        impls = ["flashcore", "flashcore_sm80", "flashcore_sm90", "sdpa_flash", "sdpa_cudnn", "cutlass_ex88"]
        self.assertEqual(sorted({c.impl for c in cells}), sorted(impls))
        self.assertEqual({c.pass_ for c in cells}, {"fwd"})
        self.assertEqual(len(cells), 6 * 2 * 3 * 2 * 6 + 6 * 2 * 3 * 2 * 2)
        gqa = {(c.dtype, c.head_dim, c.heads, c.kv_heads, c.seqlen_q) for c in cells if c.gqa}
        self.assertIn(("fp16", 128, 16, 4, 4096), gqa)
        self.assertIn(("bf16", 256, 8, 1, 8192), gqa)
        est = plan.estimate_seconds(cells, args.warmup_ms, args.rep_ms, args.min_reps, args.max_reps)
        self.assertLess(est, args.budget_s)
        self.assertEqual(options.parse(["--hopper", "--gqa-ratios", "0"]).gqa_ratios, [])

    def test_latency_graph_cells(self):
        args = options.parse(["--quick"])
        lat = [c for c in options.all_cells(args) if c.suite == "latency"]
        graph = {c.impl for c in lat if c.via == "graph"}
        self.assertEqual(graph, {"flashcore", "flashcore_sm80", "flashcore_sm90", "sdpa_flash", "sdpa_cudnn",
                                 "sdpa_efficient", "sdpa_math"})
        eager = {c.impl for c in lat if c.via == "torch"}
        self.assertEqual(eager, graph)
        self.assertEqual(len({c.key for c in lat}), len(lat))
        self.assertFalse(any(c.via == "graph" for c in options.all_cells(options.parse(["--quick", "--no-graph"]))))

    def test_row_schema(self):
        cell = plan.Cell("sweep", "flashcore", "fwd", "bf16", 128, True, 4, 16, 4096, 4096, heads_kv=4)
        row = cell.row(ms=1.0)
        for field in ("impl", "kernels", "pass", "dtype", "head_dim", "causal", "batch", "heads", "heads_kv",
                      "seqlen_q", "seqlen_k", "ms", "tflops", "reason"):
            self.assertIn(field, row)
        self.assertEqual((row["heads"], row["heads_kv"]), (16, 4))
        self.assertIn("kv4", cell.key)
        self.assertEqual(plan.Cell("sweep", "flashcore", "fwd", "bf16", 128, True, 4, 16, 4096, 4096).row()["heads_kv"],
                         16)

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


class FamiliesTest(unittest.TestCase):
    def test_forced_restores(self):
        env = families.ENV
        saved = os.environ.pop(env, None)
        try:
            with families.forced("flashcore_sm90"):
                self.assertEqual(os.environ[env], "sm90")
            self.assertNotIn(env, os.environ)
            os.environ[env] = "sm80"
            with families.forced("flashcore"):
                self.assertEqual(os.environ[env], "auto")  # the caller's setting does not reach auto rows
            self.assertEqual(os.environ[env], "sm80")
            try:
                with families.forced("flashcore_sm90"):
                    raise NotImplementedError("kernels: sm90 has no backward")
            except NotImplementedError:
                pass
            self.assertEqual(os.environ[env], "sm80")
            with families.forced("sdpa_cudnn"):
                self.assertEqual(os.environ[env], "sm80")  # not flashcore's: untouched
        finally:
            os.environ.pop(env, None)
            if saved is not None:
                os.environ[env] = saved

    def test_label(self):
        self.assertEqual(families.label("fwd", "sm90", None), "sm90")
        self.assertEqual(families.label("bwd", None, "sm80"), "sm80")
        self.assertEqual(families.label("fwd_bwd", "sm90", "sm80"), "sm90+sm80")
        self.assertIsNone(families.label("fwd_bwd", "sm90", None))

    def test_selector_without_library(self):
        # No built flashcore library here: the selector says why, and rows keep kernels null.
        sel = families.Selector()
        if sel.missing is None:
            self.skipTest("a flashcore library is importable here")
        self.assertEqual(sel.row_fields(None, "fwd", None, None, None, False)["kernels"], None)


def _torch_or_none():
    try:
        import torch
        return torch if hasattr(torch, "randn") else None  # not the fake_gpu stand-in
    except Exception:
        return None


def _flashcore_or_none():
    """flashcore from the repository's python/ with the library FLASHCORE_LIBRARY names (a CPU build
    will do): the family query's ctypes plumbing runs for real on CPU tensors."""
    if not os.environ.get("FLASHCORE_LIBRARY") or _torch_or_none() is None:
        return None
    sys.path.insert(0, os.path.join(os.path.dirname(BENCH), "python"))
    try:
        import flashcore
        from flashcore import _library
        return flashcore if hasattr(_library, "selected_kernels") else None
    except Exception:
        return None


@unittest.skipUnless(_torch_or_none(), "torch not installed")
class TorchCpuTest(unittest.TestCase):
    """The parts of a GPU cell that also run on CPU tensors with the real torch."""

    def inputs(self, torch, heads=8, heads_kv=2):
        import types
        gen = torch.Generator().manual_seed(0)
        q = torch.randn(2, heads, 64, 32, generator=gen)
        k = torch.randn(2, heads_kv, 64, 32, generator=gen)
        v = torch.randn(2, heads_kv, 64, 32, generator=gen)
        return types.SimpleNamespace(gqa=heads != heads_kv, sdpa_q=q, sdpa_k=k, sdpa_v=v, sdpa_grad_inputs=(q, k, v),
                                     sdpa_dout=torch.randn(2, heads, 64, 32, generator=gen))

    def test_sdpa_gqa_native_and_repeated(self):
        torch = _torch_or_none()
        from flashbench import impls
        inp = self.inputs(torch)
        F = torch.nn.functional
        expected = F.scaled_dot_product_attention(inp.sdpa_q, impls.repeat_kv(inp.sdpa_k, 4),
                                                  impls.repeat_kv(inp.sdpa_v, 4), is_causal=True)
        notes = {}
        forward, grads, _ = impls.forward_call(torch, "sdpa_flash", inp, True, None, notes)
        self.assertEqual(notes["gqa_via"], "enable_gqa")
        self.assertTrue(torch.allclose(forward(), expected, atol=1e-5))
        self.assertEqual(grads[1].shape[1], 2)
        real = F.scaled_dot_product_attention

        def refuses_gqa(*args, **kwargs):
            if kwargs.get("enable_gqa"):
                raise RuntimeError("No available kernel. Aborting execution.")
            return real(*args, **kwargs)
        F.scaled_dot_product_attention = refuses_gqa
        try:
            notes = {}
            forward, grads, _ = impls.forward_call(torch, "sdpa_cudnn", inp, True, None, notes)
            self.assertEqual(notes["gqa_via"], "repeat_kv")
            self.assertIn("No available kernel", notes["note"])
            self.assertTrue(torch.allclose(forward(), expected, atol=1e-5))
            self.assertEqual(grads[1].shape[1], 8)
            self.assertTrue(grads[1].requires_grad)
        finally:
            F.scaled_dot_product_attention = real

    @unittest.skipUnless(_flashcore_or_none(), "no flashcore library (set FLASHCORE_LIBRARY to a built libflashcore_c.so)")
    def test_selector_on_cpu(self):
        torch = _torch_or_none()
        sel = families.Selector()
        self.assertIsNone(sel.missing)
        q = torch.randn(2, 64, 8, 64, dtype=torch.bfloat16)
        k = torch.randn(2, 64, 2, 64, dtype=torch.bfloat16)
        v = torch.randn(2, 64, 2, 64, dtype=torch.bfloat16)
        # CPU calls report the auto family: the point is the call itself (argument order, descriptors).
        self.assertEqual(sel.row_fields(torch, "fwd", q, k, v, True), {"kernels": "auto"})
        self.assertEqual(sel.row_fields(torch, "fwd_bwd", q, k, v, False), {"kernels": "auto+auto"})
        bad = torch.randn(2, 64, 3, 64, dtype=torch.bfloat16)  # 8 query heads over 3 K/V heads
        fields = sel.row_fields(torch, "fwd", q, bad, bad, False)
        self.assertIsNone(fields["kernels"])
        self.assertIn("selected_kernels", fields["kernels_note"])


EX88_OUTPUT = """\
###### B 2 H 16 Q 8192 K 8192 D 128 Forward Causal #SM 132
 [--] tma ws cooperative 128x128x128     : 610.5 TFLOPS/s
       t=0.2254ms, smem=163840b
 [--] tma ws ping-pong 128x128x128       : 590.1 TFLOPS/s
       t=0.2331ms, smem=196608b
"""


class Ex88Test(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.bin = os.path.join(self.dir, "88_hopper_fmha")
        with open(os.path.join(self.dir, "out.txt"), "w") as f:
            f.write(EX88_OUTPUT)
        with open(self.bin, "w") as f:
            f.write(textwrap.dedent(f"""\
                #!/bin/bash
                echo "$@" > {self.dir}/args.txt
                for a in "$@"; do
                  case "$a" in
                    --d=256) if [[ " $* " == *" --bwd "* ]]; then echo "###### B"; echo "No backward kernel instantiated for d=256"; exit 0; fi;;
                    --d=96) echo "This kernel is not supported. Last CUDA error is: no error" >&2; echo " [FAIL]  tma ws cooperative 128x128x96 : 0 TFLOPS/s"; exit 0;;
                    --d=32) echo "boom" >&2; exit 3;;
                  esac
                done
                cat {self.dir}/out.txt
                """))
        os.chmod(self.bin, 0o755)

    def cell(self, **kw):
        args = dict(suite="sweep", impl="cutlass_ex88", pass_="fwd", dtype="fp16", head_dim=128, causal=True,
                    batch=2, heads=16, seqlen_q=8192, seqlen_k=8192, via="binary")
        args.update(kw)
        return plan.Cell(**args)

    def test_parse(self):
        variants = ex88.parse(EX88_OUTPUT)
        self.assertEqual([v["variant"] for v in variants],
                         ["tma ws cooperative 128x128x128", "tma ws ping-pong 128x128x128"])
        self.assertEqual([v["ms"] for v in variants], [0.2254, 0.2331])
        self.assertEqual(variants[0]["tflops_reported"], 610.5)

    def test_measure_best_variant_and_flops(self):
        cell = self.cell()
        row = ex88.measure(self.bin, cell, fixed_iterations=30)
        self.assertEqual(row["ms"], 0.2254)
        self.assertEqual(row["ex88_variant"], "tma ws cooperative 128x128x128")
        # The benchmark's FLOP count (the example's own too): 4*B*H*S*S*D / 2 causal.
        self.assertAlmostEqual(row["tflops"], 4 * 2 * 16 * 8192 * 8192 * 128 / 2 / 0.2254e-3 / 1e12, places=3)
        self.assertEqual(len(row["ex88_variants"]), 2)
        self.assertIsNone(row["kernels"])
        with open(os.path.join(self.dir, "args.txt")) as f:
            args = f.read().split()
        self.assertEqual(args, ["--b=2", "--h=16", "--q=8192", "--k=8192", "--d=128", "--mask=causal",
                                "--iterations=30", "--verbose"])
        row = ex88.measure(self.bin, self.cell(pass_="bwd", causal=False))
        self.assertIsNotNone(row["ms"])
        with open(os.path.join(self.dir, "args.txt")) as f:
            args = f.read().split()
        self.assertIn("--bwd", args)
        self.assertIn("--mask=no", args)
        self.assertAlmostEqual(row["tflops"], 2.5 * 4 * 2 * 16 * 8192 * 8192 * 128 / 0.2254e-3 / 1e12, places=3)

    def test_blanks(self):
        self.assertIn("fp16 only", ex88.measure(self.bin, self.cell(dtype="bf16"))["reason"])
        self.assertIn("MHA only", ex88.measure(self.bin, self.cell(heads_kv=4))["reason"])
        self.assertIn("fwd_bwd", ex88.measure(self.bin, self.cell(pass_="fwd_bwd"))["reason"])
        self.assertIn("No backward kernel instantiated for d=256",
                      ex88.measure(self.bin, self.cell(pass_="bwd", head_dim=256, heads=8))["reason"])
        self.assertIn("every kernel variant failed", ex88.measure(self.bin, self.cell(head_dim=96))["reason"])
        self.assertIn("exit 3: boom", ex88.measure(self.bin, self.cell(head_dim=32))["reason"])
        row = ex88.measure("/nonexistent/88_hopper_fmha", self.cell())
        self.assertIn("build_cutlass_ex88.sh", row["reason"])
        self.assertIsNone(row["tflops"])

    def test_iterations(self):
        self.assertEqual(ex88.iterations_for(self.cell(), 40.0, fixed=7), 7)
        n = ex88.iterations_for(self.cell(seqlen_q=512, seqlen_k=512, batch=32), 40.0)
        self.assertTrue(10 <= n <= 100)


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
        # sweep + latency: 7 impls eager and as graph replay, the CLI and 3 rungs
        self.assertEqual(len(data["rows"]), 3 * 2 * 2 * 2 * 3 + 7 * 2 + 4)
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

    def test_families_gqa_ex88(self):
        """Issue 14's run on the stand-in: both families forced per cell (an ambient FLASHCORE_KERNELS
        reaches no row), kernels recorded, sm90's missing backward a blank with its reason, GQA rows,
        example 88 through a stand-in binary, and the report's per-cell family table."""
        bindir = tempfile.mkdtemp()
        binary = os.path.join(bindir, "88_hopper_fmha")
        with open(binary, "w") as f:
            f.write("#!/bin/bash\n"
                    "echo '###### B 4 H 16 Q 4096 K 4096 D 128 Forward Full #SM 132'\n"
                    "echo ' [--] tma ws cooperative 128x128x128     : 640 TFLOPS/s'\n"
                    "echo '       t=0.2ms, smem=1b'\n")
        os.chmod(binary, 0o755)
        p, data, _ = self.run_bench(
            {"FLASHCORE_KERNELS": "sm80"}, "--hopper", "--passes", "fwd,bwd", "--head-dims", "128",
            "--seqlens", "1k,4k", "--ex88", binary, "--no-memory")
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = {(r["suite"], r["impl"], r["pass"], r["dtype"], r["causal"], r["heads_kv"], r["seqlen_q"],
                 r.get("via")): r for r in data["rows"]}
        auto = rows[("sweep", "flashcore", "fwd", "bf16", True, 16, 4096, "torch")]
        self.assertEqual(auto["kernels"], "sm90")  # auto, not the ambient sm80
        self.assertEqual(rows[("sweep", "flashcore", "bwd", "bf16", True, 16, 4096, "torch")]["kernels"], "sm80")
        self.assertEqual(rows[("sweep", "flashcore_sm80", "fwd", "fp16", False, 16, 1024, "torch")]["kernels"], "sm80")
        sm90_bwd = rows[("sweep", "flashcore_sm90", "bwd", "bf16", False, 16, 1024, "torch")]
        self.assertIsNone(sm90_bwd["tflops"])
        self.assertIn("NotImplementedError", sm90_bwd["reason"])
        self.assertIn("kernels", sm90_bwd["reason"])
        self.assertEqual(data["restarts"], [])  # a forced family's refusal is a row, not a crash
        gqa = rows[("sweep", "flashcore_sm90", "fwd", "bf16", True, 4, 4096, "torch")]
        self.assertEqual((gqa["heads"], gqa["kernels"]), (16, "sm90"))
        self.assertIn(("sweep", "sdpa_cudnn", "fwd", "fp16", True, 2, 4096, "torch"), rows)
        self.assertEqual(rows[("sweep", "sdpa_cudnn", "fwd", "fp16", True, 2, 4096, "torch")]["gqa_via"], "repeat_kv")
        ex = rows[("sweep", "cutlass_ex88", "fwd", "fp16", False, 16, 4096, "binary")]
        self.assertAlmostEqual(ex["tflops"], 4 * 4 * 16 * 4096 * 4096 * 128 / 0.2e-3 / 1e12, places=3)
        self.assertIn("fp16 only", rows[("sweep", "cutlass_ex88", "fwd", "bf16", False, 16, 4096, "binary")]["reason"])
        self.assertIn("MHA only", rows[("sweep", "cutlass_ex88", "fwd", "fp16", True, 4, 4096, "binary")]["reason"])
        self.assertTrue(all(r["kernels"] is None for r in data["rows"] if not r["impl"].startswith("flashcore")))
        graph = rows[("latency", "flashcore_sm90", "fwd", "fp16", False, 8, 512, "graph")]
        self.assertIsNotNone(graph["ms_wall"])
        self.assertIn("kernel families", p.stdout)
        self.assertIn("sm90/cuDNN", p.stdout)
        self.assertIn("sm90/ex88", p.stdout)
        self.assertIn("causal GQA 4:1", p.stdout)
        md_path = [f for f in os.listdir(os.path.dirname(p.stdout.split("report ")[-1].split()[0]))
                   if f.endswith(".md")]
        self.assertEqual(len(md_path), 1)

    def test_budget(self):
        p, data, _ = self.run_bench({"FAKE_HANG": "sweep|sdpa_flash|fwd|bf16|d64|causal&q1024"}, "--quick",
                                    "--head-dims", "64", "--budget-s", "1", "--cell-timeout-s", "100",
                                    "--no-latency", "--no-memory")
        reasons = {r["reason"] for r in data["rows"] if r["reason"]}
        self.assertTrue(any("hard time limit" in r or "budget" in r for r in reasons), reasons)


if __name__ == "__main__":
    unittest.main()
