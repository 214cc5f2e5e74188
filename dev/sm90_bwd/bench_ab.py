"""Session 9's A/B of the sm90 backward in the dev harness (one process per library, FC_LIB picks
it; the rows are JSON lines on stdout and in $OUT/ab.jsonl):
  splits: GQA 4:1 and 8:1 causal at 4k/8k (bench/'s grid: 16k tokens, d128 h16, d64 h32), the
          kv split forced to 1, 2 and 4 and the launcher's own rule (0), default and deterministic;
  det:    MHA shapes, default and deterministic (the library before session 9 against this one);
  prof:   torch.profiler's per-kernel times of one backward (memset, preprocess, main, convert)
          beside cuDNN's, d128 MHA at 2k and 4k: how much of the pass is outside the main kernel.
  main:   (session 10) the default mode at 16k tokens: d128 MHA, GQA 4:1 and 8:1 at 2k/4k/8k, causal
          and not, and d256 MHA at 2k/4k; the library's kernels and each dev variant of AB_VARIANTS
          (comma-separated; each timed on the shapes of its head dim, fc_sm90_bwd_variant_dim) timed
          in two alternating rounds, the faster kept. Session 11: AB_DIMS (default 128,256) picks
          the head dims, d64 (h32) and d96 (h16) as d128's grid; AB_GQA (default 1,4,8) the group
          sizes; AB_SEQ (default 2048,4096,8192) the sequence lengths; AB_DTYPE=fp16 the dtype;
          AB_BASE_LIB=libfc_base.so times that library too, in the same rounds (impl "base").
  d256:   (session 11) bf16 d256 at 16k tokens, MHA (h8) and GQA 8:1 (h8, kv 1) at 2k/4k/8k, causal
          and not (AB_D256_KV=8,2,1 adds GQA 4:1): the library's kernels and each d256 dev variant
          of AB_VARIANTS, two alternating rounds, the faster kept; AB_FP16=1 adds the same shapes
          in fp16 (the library only).
  l2:     (session 11) bf16 d256 causal at 16k tokens (MHA h8, GQA 4:1 and 8:1) with the L2 section
          of the causal order forced to 1, 2, 4, ... (bwd_tile_order.h; 0 = the rule), at GQA also
          with 4 CTAs a group (kv split forced), two alternating rounds.
  prof:   PROF_D=256 profiles bf16 d256 MHA h8 at 2k and 4k instead of d128.
  once:   (session 12) one default-mode backward of each AB_ONCE shape ("b,s,hq,hkv,causal[,variant]"
          separated by ";", d256 bf16), no cuDNN and no timing: the target of device_run.sh's ncu step.
CUDA events, 3 warm-ups, mean of 20, warm L2 (as bench.py); FLOPs 2.5 x 4 B H S^2 D, halved when
causal. cuDNN = SDPA's CUDNN_ATTENTION backward in the same process (enable_gqa where it is taken,
else K/V repeated to every query head)."""
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import fc_sm90_bwd

LIB = os.environ.get("FC_LIB", "libfc_sm90_bwd.so")
ROWS = []


def emit(**row):
    row["lib"] = LIB
    ROWS.append(row)
    print(json.dumps(row), flush=True)


def timeit(fn, iters=20):
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters * 1e-3


def flops_bwd(b, hq, s, d, causal):
    f = 2.5 * 4 * b * hq * s * s * d
    return f / 2 if causal else f


class Problem:
    def __init__(self, b, s, hq, hkv, d, causal, dtype=torch.bfloat16, cudnn=True):
        self.b, self.s, self.hq, self.hkv, self.d, self.causal = b, s, hq, hkv, d, causal
        self.q, self.do = (torch.randn(b, s, hq, d, device="cuda", dtype=dtype) for _ in range(2))
        self.k, self.v = (torch.randn(b, s, hkv, d, device="cuda", dtype=dtype) for _ in range(2))
        self.dq = torch.empty_like(self.q)
        self.dk, self.dv = torch.empty_like(self.k), torch.empty_like(self.v)
        self.flops = flops_bwd(b, hq, s, d, causal)
        if not cudnn:
            self.out = torch.randn_like(self.q)
            self.lse = torch.full((b, hq, s), 30.0, device="cuda", dtype=torch.float32)
            return
        qt, kt, vt = (t.transpose(1, 2).detach().requires_grad_(True) for t in (self.q, self.k, self.v))
        dot = self.do.transpose(1, 2)
        self.cudnn_via = "enable_gqa"
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            try:
                o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=hq != hkv)
            except RuntimeError:
                self.cudnn_via = "repeat_kv"
                g = hq // hkv
                kt, vt = (t.detach().repeat_interleave(g, dim=1).requires_grad_(True) for t in (kt, vt))
                o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
            self.cudnn_step = lambda: torch.autograd.grad(o, (qt, kt, vt), dot, retain_graph=True)
            self.t_cudnn = timeit(self.cudnn_step)
        # Values only matter for realism, not timing (bench.py does the same).
        self.out = o.detach().transpose(1, 2).contiguous()
        self.lse = torch.zeros(b, hq, s, device="cuda", dtype=torch.float32)

    def ours(self, deterministic):
        return lambda: fc_sm90_bwd.backward(self.do, self.q, self.k, self.v, self.out, self.lse, self.causal, self.dq,
                                            self.dk, self.dv, deterministic=deterministic)

    def shape(self):
        return dict(b=self.b, s=self.s, hq=self.hq, hkv=self.hkv, d=self.d, causal=self.causal)


def splits_section(new_lib):
    for d, hq in ((128, 16), (64, 32)):
        for ratio in (4, 8):
            for s in (4096, 8192):
                p = Problem(16384 // s, s, hq, hq // ratio, d, True)
                cudnn = p.flops / p.t_cudnn / 1e12
                for det in (False, True):
                    for splits in ((0, 1, 2, 4) if new_lib else (0,)):
                        fc_sm90_bwd.force_kv_splits(splits)
                        t = timeit(p.ours(det))
                        emit(section="splits", **p.shape(), det=det, splits=splits, tflops=p.flops / t / 1e12,
                             cudnn_tflops=cudnn, ratio=p.t_cudnn / t, cudnn_via=p.cudnn_via)
                fc_sm90_bwd.force_kv_splits(0)
                del p
                torch.cuda.empty_cache()


def det_section():
    for d, h in ((128, 16), (64, 32)):
        for (b, s, causal) in ((4, 4096, False), (4, 4096, True), (1, 16384, True), (8, 2048, False)):
            p = Problem(b, s, h, h, d, causal)
            cudnn = p.flops / p.t_cudnn / 1e12
            for det in (False, True):
                t = timeit(p.ours(det))
                emit(section="det", **p.shape(), det=det, tflops=p.flops / t / 1e12, cudnn_tflops=cudnn,
                     ratio=p.t_cudnn / t)
            del p
            torch.cuda.empty_cache()


def prof_section():
    from torch.profiler import ProfilerActivity, profile
    d = int(os.environ.get("PROF_D", "128"))
    h = 8 if d == 256 else 16
    for (b, s) in ((8, 2048), (4, 4096)):
        p = Problem(b, s, h, h, d, False)
        for name, fn in (("flashcore", p.ours(False)), ("flashcore_det", p.ours(True)), ("cudnn", p.cudnn_step)):
            fn()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    fn()
                torch.cuda.synchronize()
            kernels = {}
            for e in prof.key_averages():
                t = getattr(e, "device_time_total", None)
                if t is None:
                    t = getattr(e, "cuda_time_total", 0)
                if str(getattr(e, "device_type", "")).endswith("CUDA") and t > 0:
                    kernels[e.key[:90]] = round(t / 5, 1)  # us per call
            emit(section="prof", **p.shape(), impl=name, us_per_call=kernels, total_us=round(sum(kernels.values()), 1))
        del p
        torch.cuda.empty_cache()


def main_section():
    variants = [int(x) for x in os.environ.get("AB_VARIANTS", "").split(",") if x]
    dims = [int(x) for x in os.environ.get("AB_DIMS", "128,256").split(",")]
    groups = [int(x) for x in os.environ.get("AB_GQA", "1,4,8").split(",")]
    seqs = [int(x) for x in os.environ.get("AB_SEQ", "2048,4096,8192").split(",")]
    dtype = torch.float16 if os.environ.get("AB_DTYPE") == "fp16" else torch.bfloat16
    base_lib = None
    if os.environ.get("AB_BASE_LIB"):
        try:
            base_lib = fc_sm90_bwd.open_library(os.environ["AB_BASE_LIB"])
        except OSError as e:
            print(f"base library not loaded: {e!r}", flush=True)
    shapes = [(16384 // s, s, 32 if d == 64 else 16, (32 if d == 64 else 16) // g, d, causal)
              for d in dims if d <= 128 for g in groups for s in seqs for causal in (False, True)]
    if 256 in dims:
        shapes += [(16384 // s, s, 8, 8, 256, causal) for s in (2048, 4096) for causal in (False, True)]
    for (b, s, hq, hkv, d, causal) in shapes:
        p = Problem(b, s, hq, hkv, d, causal, dtype)
        cudnn = p.flops / p.t_cudnn / 1e12
        impls = [("flashcore", -1, None)] + [(f"variant{v}", v, None) for v in variants
                                             if fc_sm90_bwd._LIB.fc_sm90_bwd_variant_dim(v) == fc_sm90_bwd.kernel_dim(d)]
        if base_lib is not None:
            impls.append(("base", -1, base_lib))
        best = {}
        for _ in range(2):
            for name, v, lib in impls:
                t = timeit(lambda: fc_sm90_bwd.backward(p.do, p.q, p.k, p.v, p.out, p.lse, causal, p.dq, p.dk, p.dv,
                                                        variant=v, lib=lib))
                best[name] = min(best.get(name, t), t)
        for name, t in best.items():
            emit(section="main", **p.shape(), dtype=str(dtype).split(".")[-1], impl=name, ms=t * 1e3, tflops=p.flops / t / 1e12, cudnn_tflops=cudnn,
                 cudnn_ms=p.t_cudnn * 1e3, ratio=p.t_cudnn / t, cudnn_via=p.cudnn_via)
        del p
        torch.cuda.empty_cache()


def d256_section():
    variants = [int(x) for x in os.environ.get("AB_VARIANTS", "").split(",") if x]
    variants = [v for v in variants if fc_sm90_bwd._LIB.fc_sm90_bwd_variant_dim(v) == 256]
    dtypes = [torch.bfloat16] + ([torch.float16] if os.environ.get("AB_FP16") else [])
    for dtype in dtypes:
        for hkv in [int(x) for x in os.environ.get("AB_D256_KV", "8,1").split(",")]:
            for s in (2048, 4096, 8192):
                for causal in (False, True):
                    p = Problem(16384 // s, s, 8, hkv, 256, causal, dtype=dtype)
                    cudnn = p.flops / p.t_cudnn / 1e12
                    impls = [("flashcore", -1)]
                    if dtype == torch.bfloat16:
                        impls += [(f"variant{v}", v) for v in variants]
                    best = {}
                    for _ in range(2):
                        for name, v in impls:
                            t = timeit(lambda: fc_sm90_bwd.backward(p.do, p.q, p.k, p.v, p.out, p.lse, causal, p.dq,
                                                                    p.dk, p.dv, variant=v))
                            best[name] = min(best.get(name, t), t)
                    for name, t in best.items():
                        emit(section="d256", **p.shape(), dtype=str(dtype).split(".")[-1], impl=name, ms=t * 1e3,
                             tflops=p.flops / t / 1e12, cudnn_tflops=cudnn, cudnn_ms=p.t_cudnn * 1e3,
                             ratio=p.t_cudnn / t, cudnn_via=p.cudnn_via)
                    del p
                    torch.cuda.empty_cache()


def l2_section():
    for hkv in (8, 2, 1):
        for s in (2048, 4096, 8192):
            b = 16384 // s
            units = b * hkv
            p = Problem(b, s, 8, hkv, 256, True)
            cudnn = p.flops / p.t_cudnn / 1e12
            sections = [0] + [x for x in (1, 2, 4, 8, 16) if x <= units]
            # GQA: the kv split's rule (2 here) and 4 CTAs a group, each with every section.
            configs = [(sec, splits) for splits in ((0, 4) if hkv < 8 else (0,)) for sec in sections]
            best = {}
            for _ in range(2):
                for sec, splits in configs:
                    fc_sm90_bwd.force_l2_section(sec)
                    fc_sm90_bwd.force_kv_splits(splits)
                    t = timeit(p.ours(False))
                    best[(sec, splits)] = min(best.get((sec, splits), t), t)
            fc_sm90_bwd.force_l2_section(0)
            fc_sm90_bwd.force_kv_splits(0)
            for (sec, splits), t in best.items():
                emit(section="l2", **p.shape(), units=units, l2_section=sec, splits=splits, ms=t * 1e3,
                     tflops=p.flops / t / 1e12, cudnn_tflops=cudnn, cudnn_ms=p.t_cudnn * 1e3, ratio=p.t_cudnn / t,
                     cudnn_via=p.cudnn_via)
            del p
            torch.cuda.empty_cache()


def once_section():
    for spec in os.environ.get("AB_ONCE", "4,4096,8,1,1;4,4096,8,8,1").split(";"):
        b, s, hq, hkv, causal, *variant = (int(x) for x in spec.split(","))
        p = Problem(b, s, hq, hkv, 256, bool(causal), cudnn=False)
        v = variant[0] if variant else -1
        fc_sm90_bwd.backward(p.do, p.q, p.k, p.v, p.out, p.lse, p.causal, p.dq, p.dk, p.dv, variant=v)
        torch.cuda.synchronize()
        emit(section="once", **p.shape(), variant=v)
        del p
        torch.cuda.empty_cache()


def main():
    new_lib = hasattr(fc_sm90_bwd._LIB, "fc_sm90_bwd_force_kv_splits")
    sections = os.environ.get("AB_SECTIONS", "splits,det,prof").split(",")
    for name, fn in (("splits", lambda: splits_section(new_lib)), ("det", det_section), ("prof", prof_section),
                     ("main", main_section), ("d256", d256_section), ("l2", l2_section),
                     ("once", once_section)):
        if name in sections:
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - report and go on to the next section
                print(f"section {name} failed: {e!r}", flush=True)
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "ab.jsonl"), "a") as f:
            for r in ROWS:
                f.write(json.dumps(dict(r, device=torch.cuda.get_device_name())) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
