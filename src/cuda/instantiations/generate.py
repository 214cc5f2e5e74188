#!/usr/bin/env python3
"""Writes one .cu per (pass, kernel family, dtype, head dim) so nvcc compiles them in parallel, and
families.cmake, which tells CMake what each family is.

Run from anywhere: python3 src/cuda/instantiations/generate.py. The outputs are checked in; CMake
builds the ones FLASHCORE_KERNEL_FAMILIES, FLASHCORE_DTYPES and FLASHCORE_HEAD_DIMS ask for and
generates the dispatch table's rows from them (src/cuda/CMakeLists.txt, dispatch.cu).

A kernel family is a folder src/cuda/<family>/ with <pass>_launch.h (declaring run_<pass><Element,
kHeadDim>, and for the backward plan_bwd_workspace) and <pass>_launch_template.h (defining them),
plus an entry in FAMILIES below. Nothing else has to change to add one.
"""
from pathlib import Path

HERE = Path(__file__).resolve().parent
DTYPES = {"fp16": "cutlass::half_t", "bf16": "cutlass::bfloat16_t"}

# family -> what it serves and how it is built.
#   enum      flashcore::KernelFamily's enumerator; a larger value is preferred by kernels=auto
#   cc        compute capabilities it runs on (major*10+minor, inclusive)
#   archs     CMake CUDA architectures its files are compiled for (None: FLASHCORE_CUDA_ARCHS)
#   flags     extra nvcc flags for its files
#   passes    pass -> head dims instantiated
#   options   the attention options its kernels serve (of OPTIONS); kernels=auto passes a problem
#             that needs one to a row that has it, a forced family without it fails naming
#             `kernels` (dispatch.cu). Absent: none.
#   pass_options  pass -> options its kernels of that pass serve besides the family's "options": a
#             list (every head dim of the pass), or option -> the head dims that serve it.
#   pass_dtypes   pass -> the dtypes it is instantiated for (absent: every dtype of DTYPES).
#   variants  pass -> variant -> {launcher, head_dims, options}: a second set of kernels of that
#             pass, in files <pass>_<family>_<dtype>_hdim<d>_<variant>.cu, each a dispatch row of its
#             own with its own options (the rows above keep the family's). For equal family and head
#             dim a problem runs the row with fewer options, so plain calls keep the plain kernels.
FAMILIES = {
    "sm80": {
        # mma.sync, ldmatrix, cp.async: runs on every GPU from Ampere on; the fallback.
        "enum": "kSm80",
        "cc": (80, 1000),
        "archs": None,
        "flags": [],
        # decode (forward_kvcache): FP32-FMA split-KV kernels, each serving every head dim up to its own.
        "passes": {"fwd": [32, 64, 96, 128, 192, 256], "bwd": [32, 64, 96, 128, 192, 256], "decode": [64, 128, 256]},
        "options": ["window", "softcap", "alibi", "varlen", "dropout"],
    },
    "sm90": {
        # TMA, wgmma, setmaxnreg: sm_90a code runs on compute capability 9.0 only (H100, H200).
        # The extended MMA shapes enable wgmma N = 80, 144, 176, ... for the tile table.
        "enum": "kSm90",
        "cc": (90, 90),
        "archs": "90a-real",
        "flags": ["-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED"],
        # The backward: up to d128 two consumer warpgroups each hold dK and dV of 64 keys in
        # registers; d256 computes dK and dV transposed, the warpgroups splitting d
        # (bwd_swapkv_*.h); kernels=auto runs d192 backward on sm80 (docs/tuning/backward_sm90.md).
        # decode (forward_kvcache, sm90/decode_cluster_kernel.h): the split CTAs of a sequence as one
        # thread-block cluster merging through distributed shared memory; bf16 d128 only (one file:
        # CI time; issue 19's shape), d <= 128 served, the rest of its problems handed to the sm80 row.
        "passes": {"fwd": [64, 96, 128, 192, 256], "bwd": [64, 96, 128, 256], "decode": [128]},
        "pass_dtypes": {"decode": ["bf16"]},
        # The plain kernels serve no option but varlen (a runtime path: the forward's sm90/fwd_sequence.h
        # and tile_scheduler.h's FwdVarlenSlots; the d <= 128 backward's sm90/bwd_sequence.h, not the
        # d256 one, whose kernels are bwd_swapkv_*.h); kernels=auto runs backwards with options at
        # d > 128 (or dropout with another option), and forwards with options at d > 128, on sm80.
        "options": [],
        "pass_options": {"fwd": ["varlen"], "bwd": {"varlen": [64, 96, 128]}},
        # The forward's option kernels (sm90/fwd_score_options.h): window, softcap, ALiBi and
        # dropout as runtime data, and varlen (fwd_sequence.h: each sequence's causal row offset
        # rounded to 16 rows with dropout, as dense calls' are). Per file: the window kernel and the
        # softcap/ALiBi kernel, each causal zig-zag, causal one tile per CTA and non-causal, and at
        # d128 the ALiBi-only kernel, causal zig-zag and non-causal (8 kernels). d64 and d128 only
        # (4 files: CI time); d <= 128 runs on them padded.
        # The backward's dropout kernels (sm90/bwd_dropout.h): d128 only (2 files; d <= 128 runs on
        # them padded). Its score-option kernels (sm90/bwd_score_options.h): window, softcap and
        # ALiBi as runtime data, and varlen (bwd_sequence.h); d128 only (2 files: CI time); d <= 128
        # runs on them padded, dropout with another option on sm80.
        "variants": {
            "fwd": {"options": {"launcher": "run_fwd_options", "head_dims": [64, 128],
                                "options": ["window", "softcap", "alibi", "dropout", "varlen"]}},
            "bwd": {"dropout": {"launcher": "run_bwd_dropout", "head_dims": [128], "options": ["dropout"]},
                    "options": {"launcher": "run_bwd_options", "head_dims": [128],
                                "options": ["window", "softcap", "alibi", "varlen"]}},
        },
    },
}
# option -> dispatch.h's KernelOption enumerator
OPTIONS = {"window": "kWindow", "softcap": "kSoftcap", "alibi": "kAlibi", "varlen": "kVarlen", "dropout": "kDropout"}
LAUNCHERS = {"fwd": ("run_fwd", "FwdParams"), "bwd": ("run_bwd", "BwdParams"), "decode": ("run_decode", "DecodeParams")}

TEMPLATE = """// Generated by generate.py; do not edit.
#include "cuda/{family}/{pass_}_launch_template.h"

namespace flashcore::cuda::{family} {{
template Status {launcher}<{element}, {head_dim}>(const {params}& params, cudaStream_t stream);
}}  // namespace flashcore::cuda::{family}
"""


def pass_option_names(family: dict, pass_: str, head_dim=None) -> list:
    """A pass's own options (pass_options): all of a list; of a dict, those naming head_dim (None: every head dim)."""
    extra = family.get("pass_options", {}).get(pass_, [])
    if isinstance(extra, dict):
        return [name for name, dims in extra.items() if head_dim in dims]
    return list(extra)


def options_mask(family: dict, pass_: str = "", head_dim=None) -> str:
    """The options of a family's pass (or of a variant) as a C++ expression of dispatch.h's KernelOption bits."""
    names = family.get("options", []) + pass_option_names(family, pass_, head_dim)
    unknown = [n for n in names if n not in OPTIONS]
    if unknown:
        raise SystemExit(f"unknown kernel options {unknown}; known: {list(OPTIONS)}")
    return " | ".join(f"KernelOption::{OPTIONS[n]}" for n in names) or "KernelOption::kNone"


def families_cmake() -> str:
    lines = ["# Generated by generate.py; do not edit. What each kernel family is (see generate.py).",
             f"set(FLASHCORE_ALL_KERNEL_FAMILIES {' '.join(FAMILIES)})"]
    for name, f in FAMILIES.items():
        archs = f["archs"] if f["archs"] is not None else "${FLASHCORE_CUDA_ARCHS}"
        lines += [
            f"set(FLASHCORE_FAMILY_{name}_ENUM {f['enum']})",
            f"set(FLASHCORE_FAMILY_{name}_MIN_CC {f['cc'][0]})",
            f"set(FLASHCORE_FAMILY_{name}_MAX_CC {f['cc'][1]})",
            f'set(FLASHCORE_FAMILY_{name}_ARCHS "{archs}")',
            f'set(FLASHCORE_FAMILY_{name}_FLAGS "{";".join(f["flags"])}")',
            f"set(FLASHCORE_FAMILY_{name}_PASSES {' '.join(f['passes'])})",
            f'set(FLASHCORE_FAMILY_{name}_OPTIONS "{options_mask(f)}")',
        ]
        lines += [f'set(FLASHCORE_FAMILY_{name}_{pass_}_OPTIONS "{options_mask(f, pass_)}")' for pass_ in f["passes"]]
        # Options that only some head dims of a pass serve: one line per head dim (CMake prefers it).
        for pass_, extra in f.get("pass_options", {}).items():
            if isinstance(extra, dict):
                lines += [f'set(FLASHCORE_FAMILY_{name}_{pass_}_hdim{d}_OPTIONS "{options_mask(f, pass_, d)}")'
                          for d in f["passes"][pass_]]
        for pass_, variants in f.get("variants", {}).items():
            for variant, v in variants.items():
                lines += [
                    f"set(FLASHCORE_FAMILY_{name}_{pass_}_{variant}_LAUNCHER {v['launcher']})",
                    f'set(FLASHCORE_FAMILY_{name}_{pass_}_{variant}_OPTIONS "{options_mask(v)}")',
                ]
    return "\n".join(lines) + "\n"


def write_if_changed(path: Path, text: str) -> None:
    """Leaves a file whose text is already right untouched, so running this script does not make
    every instantiation look new to the build (a full CUDA rebuild)."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def main() -> None:
    files = {}
    for family, f in FAMILIES.items():
        for pass_, head_dims in f["passes"].items():
            launcher, params = LAUNCHERS[pass_]
            for dtype, element in DTYPES.items():
                if dtype not in f.get("pass_dtypes", {}).get(pass_, DTYPES):
                    continue
                for head_dim in head_dims:
                    files[f"{pass_}_{family}_{dtype}_hdim{head_dim}.cu"] = TEMPLATE.format(
                        family=family, pass_=pass_, launcher=launcher, element=element, head_dim=head_dim,
                        params=params)
        for pass_, variants in f.get("variants", {}).items():
            params = LAUNCHERS[pass_][1]
            for variant, v in variants.items():
                for dtype, element in DTYPES.items():
                    for head_dim in v["head_dims"]:
                        files[f"{pass_}_{family}_{dtype}_hdim{head_dim}_{variant}.cu"] = TEMPLATE.format(
                            family=family, pass_=pass_, launcher=v["launcher"], element=element,
                            head_dim=head_dim, params=params)
    for old in HERE.glob("*.cu"):
        if old.name not in files:
            old.unlink()
    for name, text in files.items():
        write_if_changed(HERE / name, text)
    write_if_changed(HERE / "families.cmake", families_cmake())


if __name__ == "__main__":
    main()
