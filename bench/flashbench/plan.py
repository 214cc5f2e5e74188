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
SWEEP_IMPLS = ("flashcore",) + tuple(SDPA_BACKENDS)
PASSES = ("fwd", "bwd", "fwd_bwd")
DTYPES = ("bf16", "fp16")
HEAD_DIMS = (64, 128, 256)
SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)

QUICK = {
    "impls": ("flashcore", "sdpa_flash", "sdpa_cudnn"),
    "dtypes": ("bf16",),
    "head_dims": (128,),
    "seqlens": (1024, 4096),
    "passes": ("fwd", "bwd"),
}
FULL = {"impls": SWEEP_IMPLS, "dtypes": DTYPES, "head_dims": HEAD_DIMS, "seqlens": SEQLENS, "passes": PASSES}

# The small-shape latency table: the shape the project grew from.
LATENCY_SHAPE = {"dtype": "fp16", "head_dim": 64, "causal": False, "batch": 1, "heads": 8, "seqlen": 512}
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
    via: str = "torch"  # "torch" (timed in this process) or "cli" (the C++ CLI times itself)
    skip: Optional[str] = field(default=None, compare=False)  # reason it is planned but not run

    @property
    def key(self):
        return "|".join(
            [self.suite, self.impl, self.pass_, self.dtype, f"d{self.head_dim}", "causal" if self.causal else "full",
             f"b{self.batch}", f"h{self.heads}", f"q{self.seqlen_q}", f"k{self.seqlen_k}"])

    @property
    def shape_key(self):
        return (self.dtype, self.head_dim, self.causal, self.batch, self.heads, self.seqlen_q, self.seqlen_k)

    def flops(self):
        return attention_flops(self.batch, self.heads, self.seqlen_q, self.seqlen_k, self.head_dim, self.causal,
                               self.pass_)

    def row(self, ms=None, reason=None, **extra):
        """The JSON row: the fields every consumer relies on, then any extras."""
        out = {
            "suite": self.suite, "impl": self.impl, "pass": self.pass_, "dtype": self.dtype,
            "head_dim": self.head_dim, "causal": self.causal, "batch": self.batch, "heads": self.heads,
            "seqlen_q": self.seqlen_q, "seqlen_k": self.seqlen_k,
            "ms": ms, "tflops": tflops(self.flops(), ms) if ms is not None else None,
            "reason": None if ms is not None else (reason or "not run"),
        }
        out.update(extra)
        return out

    def describe(self):
        mask = "causal" if self.causal else "full"
        return (f"{self.suite} {self.impl} {self.pass_} {self.dtype} d{self.head_dim} {mask} "
                f"B={self.batch} H={self.heads} S={self.seqlen_q}")


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
                        skip = None
                        if impl == "sdpa_math" and seqlen > math_max_seqlen:
                            skip = (f"skipped: the math backend materialises S and P; run only for "
                                    f"seqlen <= {math_max_seqlen}")
                        for pass_ in passes:
                            cells.append(Cell("sweep", impl, pass_, dtype, head_dim, causal, batch, heads, seqlen,
                                              seqlen, skip=skip))
    return cells


def latency_cells(impls, ladder):
    s = LATENCY_SHAPE
    cells = [Cell("latency", impl, "fwd", s["dtype"], s["head_dim"], s["causal"], s["batch"], s["heads"],
                  s["seqlen"], s["seqlen"]) for impl in impls]
    # flashcore's own CLI on the same shape: the gap to the Python row is the binding's per-call cost.
    for impl in ("flashcore_cli",) + tuple(ladder):
        cells.append(Cell("latency", impl, "fwd", s["dtype"], s["head_dim"], s["causal"], s["batch"], s["heads"],
                          s["seqlen"], s["seqlen"], via="cli"))
    return cells


def memory_cells(seqlens, heads, head_dim, dtype):
    return [Cell("memory", impl, "fwd", dtype, head_dim, False, 1, heads, s, s) for s in seqlens
            for impl in MEMORY_IMPLS]


# Rough TFLOP/s on an H100 (from the anchors), only to print an expected run time before starting.
_GUESS_TFLOPS = {"flashcore": 300.0, "sdpa_flash": 300.0, "sdpa_cudnn": 450.0, "sdpa_efficient": 110.0,
                 "sdpa_math": 25.0}


def estimate_seconds(cells, warmup_ms, rep_ms, min_reps, max_reps):
    """Expected wall time of the sweep cells: first call + estimate call + warm-up + timed reps, plus a
    fixed per-cell cost for Python, input set-up and cuDNN's plan building."""
    total = 0.0
    for c in cells:
        if c.suite != "sweep" or c.skip:
            continue
        t_ms = c.flops() / (_GUESS_TFLOPS.get(c.impl, 200.0) * 1e9)
        reps = min(max_reps, max(min_reps, rep_ms / max(t_ms, 1e-3)))
        warm = max(warmup_ms, t_ms)
        total += 2 * t_ms + warm + reps * (t_ms + 0.1) + 60.0
    return total / 1e3
