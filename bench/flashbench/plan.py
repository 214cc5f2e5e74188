"""Which cells a run measures: the sweep, the small-shape latency table and the memory comparison.

A cell is one measurement (one implementation, one pass, one shape). Its key is stable across
worker restarts, so a restarted worker skips what is already recorded.
"""
from dataclasses import dataclass, field
from typing import Optional

from .flops import attention_flops, tflops

SDPA_BACKENDS = {
    "sdpa_flash": "FLASH_ATTENTION",
    "sdpa_cudnn": "CUDNN_ATTENTION",
    "sdpa_efficient": "EFFICIENT_ATTENTION",
    "sdpa_math": "MATH",
}
# flashcore as the library picks its kernel family (auto), and with each family forced through
# FLASHCORE_KERNELS for the cell (see families.py): sm80 (mma.sync, any GPU >= 8.0) and sm90 (TMA and
# wgmma, H100/H200). flashcore_det: auto with deterministic=True (bit-identical gradients), timed for the
# backward only, so its cost sits beside the default's.
FLASHCORE_IMPLS = ("flashcore", "flashcore_sm80", "flashcore_sm90", "flashcore_det")
# Deterministic mode changes the backward alone: its forward cells would repeat flashcore's.
BACKWARD_ONLY_IMPLS = ("flashcore_det",)
# CUTLASS's own Hopper FMHA (example 88), run as a separate binary per cell (ex88.py).
EX88_IMPL = "cutlass_ex88"
SWEEP_IMPLS = FLASHCORE_IMPLS + tuple(SDPA_BACKENDS) + (EX88_IMPL,)
PASSES = ("fwd", "bwd", "fwd_bwd")
DTYPES = ("bf16", "fp16")
HEAD_DIMS = (64, 128, 256)
SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)

# GQA rows (issue 14): heads_kv = heads / ratio, causal, at these seqlens, for every dtype and head dim.
GQA_RATIOS = (4, 8)
GQA_SEQLENS = (4096, 8192)

QUICK = {
    "impls": ("flashcore", "flashcore_sm80", "flashcore_sm90", "sdpa_flash", "sdpa_cudnn"),
    "dtypes": ("bf16",),
    "head_dims": (128,),
    "seqlens": (1024, 4096),
    "passes": ("fwd", "bwd"),
    "gqa_ratios": (),
}
FULL = {"impls": SWEEP_IMPLS, "dtypes": DTYPES, "head_dims": HEAD_DIMS, "seqlens": SEQLENS, "passes": PASSES,
        "gqa_ratios": GQA_RATIOS}
# Issue 14's benchmark: both kernel families, cuDNN, FA2 and CUTLASS example 88, forward, bf16 and
# fp16, head dims 64/128/256, seqlen 512..16k, causal and not, plus the GQA 4:1 and 8:1 causal rows.
HOPPER = {"impls": ("flashcore", "flashcore_sm80", "flashcore_sm90", "sdpa_flash", "sdpa_cudnn", EX88_IMPL),
          "dtypes": DTYPES, "head_dims": HEAD_DIMS, "seqlens": SEQLENS, "passes": ("fwd",),
          "gqa_ratios": GQA_RATIOS}
PRESETS = {"quick": QUICK, "full": FULL, "hopper": HOPPER}

# The small-shape latency table: the shape the project grew from.
LATENCY_SHAPE = {"dtype": "fp16", "head_dim": 64, "causal": False, "batch": 1, "heads": 8, "seqlen": 512}
# Timed eagerly and as CUDA-graph replay (via "graph"): flashcore (auto and each family) and SDPA's backends.
LATENCY_IMPLS = tuple(i for i in FLASHCORE_IMPLS if i not in BACKWARD_ONLY_IMPLS) + tuple(SDPA_BACKENDS)
LATENCY_GRAPH_IMPLS = LATENCY_IMPLS
# Standard attention's S and P grow as seqlen^2: 1 x 16 heads x 64k^2 x 2 bytes is 128 GiB, so the
# largest points show where it runs out of memory while flashcore's footprint stays linear.
MEMORY_SEQLENS_FULL = (1024, 2048, 4096, 8192, 16384, 32768, 65536)
MEMORY_SEQLENS_QUICK = (1024, 4096, 16384)
MEMORY_IMPLS = ("flashcore", "standard", "sdpa_flash")


@dataclass(frozen=True)
class Cell:
    suite: str  # "sweep", "latency" or "memory"
    impl: str
    pass_: str
    dtype: str
    head_dim: int
    causal: bool
    batch: int
    heads: int
    seqlen_q: int
    seqlen_k: int
    # "torch": timed eagerly in this process; "graph": captured once in a CUDA graph, replays timed;
    # "cli": the C++ CLI times itself; "binary": an external program times itself (cutlass_ex88).
    via: str = "torch"
    skip: Optional[str] = field(default=None, compare=False)  # reason it is planned but not run
    heads_kv: Optional[int] = None  # K/V heads (GQA/MQA); None: as many as Q's

    @property
    def kv_heads(self):
        return self.heads_kv or self.heads

    @property
    def gqa(self):
        return self.kv_heads != self.heads

    @property
    def key(self):
        parts = [self.suite, self.impl, self.pass_, self.dtype, f"d{self.head_dim}", "causal" if self.causal else "full",
                 f"b{self.batch}", f"h{self.heads}", f"q{self.seqlen_q}", f"k{self.seqlen_k}"]
        if self.gqa:
            parts.append(f"kv{self.kv_heads}")
        if self.via == "graph":
            parts.append("graph")
        return "|".join(parts)

    @property
    def shape_key(self):
        return (self.dtype, self.head_dim, self.causal, self.batch, self.heads, self.kv_heads, self.seqlen_q,
                self.seqlen_k)

    def flops(self):
        return attention_flops(self.batch, self.heads, self.seqlen_q, self.seqlen_k, self.head_dim, self.causal,
                               self.pass_)

    def row(self, ms=None, reason=None, **extra):
        """The JSON row: the fields every consumer relies on, then any extras."""
        out = {
            "suite": self.suite, "impl": self.impl, "pass": self.pass_, "dtype": self.dtype,
            "head_dim": self.head_dim, "causal": self.causal, "batch": self.batch, "heads": self.heads,
            "heads_kv": self.kv_heads, "seqlen_q": self.seqlen_q, "seqlen_k": self.seqlen_k,
            # The kernel family flashcore ran (sm80, sm90; "fwd+bwd" for fwd_bwd); set by the worker.
            "kernels": None,
            "ms": ms, "tflops": tflops(self.flops(), ms) if ms is not None else None,
            "reason": None if ms is not None else (reason or "not run"),
            "via": self.via,
        }
        out.update(extra)
        return out

    def describe(self):
        mask = "causal" if self.causal else "full"
        kv = f" Hkv={self.kv_heads}" if self.gqa else ""
        via = " (graph)" if self.via == "graph" else ""
        return (f"{self.suite} {self.impl}{via} {self.pass_} {self.dtype} d{self.head_dim} {mask} "
                f"B={self.batch} H={self.heads}{kv} S={self.seqlen_q}")


def sweep_cells(impls, dtypes, head_dims, seqlens, causals, passes, tokens, hidden, math_max_seqlen):
    """Sweep order: dtype outermost (the plotted dtype first, so a run cut short by its time budget
    still has the charts), then head dim, mask, seqlen; all implementations of one shape in a row so
    one set of inputs serves them."""
    cells = []
    for dtype in dtypes:
        for head_dim in head_dims:
            heads = max(1, hidden // head_dim)
            for causal in causals:
                for seqlen in seqlens:
                    batch = max(1, tokens // seqlen)
                    for impl in impls:
                        skip = _math_skip(impl, seqlen, math_max_seqlen)
                        for pass_ in _passes(impl, passes):
                            cells.append(Cell("sweep", impl, pass_, dtype, head_dim, causal, batch, heads, seqlen,
                                              seqlen, via=_via(impl), skip=skip))
    return cells


def _passes(impl, passes):
    """The passes an impl is timed for: a backward-only impl (flashcore_det) skips the forward."""
    return [p for p in passes if p != "fwd"] if impl in BACKWARD_ONLY_IMPLS else list(passes)


def _via(impl):
    return "binary" if impl == EX88_IMPL else "torch"


def _math_skip(impl, seqlen, math_max_seqlen):
    if impl == "sdpa_math" and seqlen > math_max_seqlen:
        return f"skipped: the math backend materialises S and P; run only for seqlen <= {math_max_seqlen}"
    return None


def gqa_cells(impls, dtypes, head_dims, ratios, seqlens, passes, tokens, hidden, math_max_seqlen):
    """The GQA part (issue 14): causal, heads_kv = heads / ratio, same tokens and width as the sweep.
    Per dtype, after that dtype's MHA cells would be natural, but they come last so a run cut short
    keeps the MHA grid whole."""
    cells = []
    for dtype in dtypes:
        for head_dim in head_dims:
            heads = max(1, hidden // head_dim)
            for ratio in ratios:
                if heads % ratio:
                    continue
                for seqlen in seqlens:
                    batch = max(1, tokens // seqlen)
                    for impl in impls:
                        skip = _math_skip(impl, seqlen, math_max_seqlen)
                        for pass_ in _passes(impl, passes):
                            cells.append(Cell("sweep", impl, pass_, dtype, head_dim, True, batch, heads, seqlen,
                                              seqlen, via=_via(impl), skip=skip, heads_kv=heads // ratio))
    return cells


def latency_cells(impls, ladder, graph_impls=()):
    s = LATENCY_SHAPE
    cells = [Cell("latency", impl, "fwd", s["dtype"], s["head_dim"], s["causal"], s["batch"], s["heads"],
                  s["seqlen"], s["seqlen"]) for impl in impls]
    cells += [Cell("latency", impl, "fwd", s["dtype"], s["head_dim"], s["causal"], s["batch"], s["heads"],
                   s["seqlen"], s["seqlen"], via="graph") for impl in graph_impls]
    # flashcore's own CLI on the same shape: the gap to the Python row is the binding's per-call cost.
    for impl in ("flashcore_cli",) + tuple(ladder):
        cells.append(Cell("latency", impl, "fwd", s["dtype"], s["head_dim"], s["causal"], s["batch"], s["heads"],
                          s["seqlen"], s["seqlen"], via="cli"))
    return cells


def memory_cells(seqlens, heads, head_dim, dtype):
    return [Cell("memory", impl, "fwd", dtype, head_dim, False, 1, heads, s, s) for s in seqlens
            for impl in MEMORY_IMPLS]


# Rough TFLOP/s on an H100 (from the anchors), only to print an expected run time before starting.
_GUESS_TFLOPS = {"flashcore": 450.0, "flashcore_sm80": 300.0, "flashcore_sm90": 450.0, "flashcore_det": 250.0, "sdpa_flash": 300.0,
                 "sdpa_cudnn": 450.0, "sdpa_efficient": 110.0, "sdpa_math": 25.0, EX88_IMPL: 450.0}


EX88_ITERATIONS_GUESS = 30


def estimate_seconds(cells, warmup_ms, rep_ms, min_reps, max_reps):
    """Expected wall time of the sweep cells: first call + estimate call + warm-up + timed reps, plus a
    fixed per-cell cost for Python, input set-up and cuDNN's plan building."""
    total = 0.0
    for c in cells:
        if c.suite != "sweep" or c.skip:
            continue
        t_ms = c.flops() / (_GUESS_TFLOPS.get(c.impl, 200.0) * 1e9)
        if c.impl == EX88_IMPL:
            # A process per cell: CUDA context, allocation, one run per kernel variant it instantiates.
            total += 1500.0 + 3 * EX88_ITERATIONS_GUESS * t_ms
            continue
        reps = min(max_reps, max(min_reps, rep_ms / max(t_ms, 1e-3)))
        warm = max(warmup_ms, t_ms)
        total += 2 * t_ms + warm + reps * (t_ms + 0.1) + 60.0
    return total / 1e3
