"""CUTLASS's Hopper FMHA (example 88) as the benchmark's impl `cutlass_ex88`: the open state of the
art issue 14 races in the same run.

The binary is built from the nvidia-cutlass wheel's sources by scripts/build_cutlass_ex88.sh (into
the git-ignored .carry/ex88/), never committed. Per cell it runs once:

    88_hopper_fmha --b=B --h=H --q=S --k=S --d=D --mask=causal|no [--bwd] --iterations=N --verbose

and prints, for each kernel variant it instantiates for that head dim,

     [--] tma ws cooperative 128x128x128     : 612.3 TFLOPS/s
           t=0.2241ms, smem=...b

The row takes the fastest variant's `t` (mean time per iteration of N back-to-back launches; the
runner has no warm-up call and no L2 flush between iterations, so CUDA_MODULE_LOADING=EAGER keeps
the lazy module load out of the first one) and computes TFLOP/s with the benchmark's own FLOP
count, so every row shares one convention (which is also the example's: forward 4·B·H·Sq·Sk·D,
halved when causal, backward 2.5x). Every variant's time is kept in the row.

What it lacks is a blank cell with the reason: bf16 (its runner is fp16 only), GQA (MHA only),
fwd_bwd (forward and backward are separate runs), head dims it has no kernel for (it says so).
"""
import math
import os
import re
import subprocess

from .flops import tflops

_RESULT = re.compile(r"^\s*(\[OK\]|\[--\]|\[FAIL\])\s*(.*?)\s*:\s*([-+0-9.eEinfa]+)\s*TFLOPS/s\s*$")
_TIME = re.compile(r"^\s*t=([-+0-9.eE]+)ms")
BUILD_HINT = "build it with: bash scripts/build_cutlass_ex88.sh (then carry .carry/ex88)"


def missing(binary):
    if not binary:
        return "no example 88 binary given (--ex88)"
    if not os.path.isfile(binary):
        return f"example 88 binary not found at {binary}; {BUILD_HINT}"
    if not os.access(binary, os.X_OK):
        return f"example 88 binary at {binary} is not executable"
    return None


def build_info(binary):
    """What scripts/build_cutlass_ex88.sh recorded beside the binary (versions, flags, build time)."""
    folder = os.path.dirname(binary or "")
    info = {}
    for name in ("stamp", "build_info"):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                info[name] = f.read().strip()[:600]
    return info or None


def unsupported(cell):
    """Why example 88 has no row for this cell, or None."""
    if cell.dtype != "fp16":
        return f"cutlass_ex88: example 88's runner is fp16 only (no {cell.dtype})"
    if cell.gqa:
        return "cutlass_ex88: example 88's runner is MHA only (no GQA/MQA option)"
    if cell.pass_ == "fwd_bwd":
        return "cutlass_ex88: example 88 times forward and backward in separate runs (no fwd_bwd)"
    return None


def iterations_for(cell, rep_ms, fixed=0, guess_tflops=450.0):
    """--iterations: `fixed` when given, else enough for about rep_ms of timed work (10..100)."""
    if fixed and fixed > 0:
        return int(fixed)
    est_ms = cell.flops() / (guess_tflops * 1e9)
    return int(min(100, max(10, math.ceil(rep_ms / max(est_ms, 1e-3)))))


def command(binary, cell, iterations):
    cmd = [binary, f"--b={cell.batch}", f"--h={cell.heads}", f"--q={cell.seqlen_q}", f"--k={cell.seqlen_k}",
           f"--d={cell.head_dim}", f"--mask={'causal' if cell.causal else 'no'}", f"--iterations={iterations}",
           "--verbose"]
    if cell.pass_ == "bwd":
        cmd.append("--bwd")
    return cmd


def parse(text):
    """[{'variant', 'status', 'tflops_reported', 'ms'}] in the order printed (ms None when the runner
    printed no time line for it)."""
    variants = []
    for line in text.splitlines():
        m = _RESULT.match(line)
        if m:
            try:
                reported = float(m.group(3))
            except ValueError:
                reported = None
            variants.append({"variant": m.group(2).strip(), "status": m.group(1).strip("[] ") or "--",
                             "tflops_reported": reported, "ms": None})
            continue
        m = _TIME.match(line)
        if m and variants and variants[-1]["ms"] is None:
            try:
                variants[-1]["ms"] = float(m.group(1))
            except ValueError:
                pass
    return variants


def _first_line(text):
    for line in (text or "").splitlines():
        line = line.strip()
        if line:
            return line[:300]
    return ""


def measure(binary, cell, rep_ms=40.0, fixed_iterations=0, timeout_s=60.0):
    """The row for one cutlass_ex88 cell (reason set where it did not run)."""
    why = unsupported(cell) or missing(binary)
    if why:
        return cell.row(reason=why, via="binary")
    iterations = iterations_for(cell, rep_ms, fixed_iterations)
    cmd = command(binary, cell, iterations)
    env = dict(os.environ, CUDA_MODULE_LOADING="EAGER")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return cell.row(reason=f"cutlass_ex88 timed out after {timeout_s:.0f} s: {' '.join(cmd)}", via="binary")
    except OSError as e:
        return cell.row(reason=f"cutlass_ex88 failed to start: {e}", via="binary")
    out = p.stdout or ""
    variants = parse(out)
    ok = [v for v in variants if v["status"] != "FAIL" and v["ms"] and v["ms"] > 0]
    extra = {"via": "binary", "ex88_command": " ".join(os.path.basename(c) if i == 0 else c
                                                       for i, c in enumerate(cmd)),
             "ex88_iterations": iterations}
    if variants:
        extra["ex88_variants"] = [
            {**v, "tflops": tflops(cell.flops(), v["ms"]) if v["ms"] else None} for v in variants]
    if p.returncode != 0 and not ok:
        msg = _first_line(p.stderr) or _first_line(out) or "no output"
        return cell.row(reason=f"cutlass_ex88 exit {p.returncode}: {msg}", **extra)
    if not ok:
        said = [line.strip() for line in out.splitlines()
                if "No " in line or "not implemented" in line or "requires" in line]
        if said:
            msg = said[0][:300]
        elif variants:
            msg = "every kernel variant failed: " + (_first_line(p.stderr) or "no time printed")
        else:
            msg = "no result line: " + (_first_line(p.stderr) or _first_line(out) or "no output")
        return cell.row(reason=f"cutlass_ex88: {msg}", **extra)
    if p.returncode != 0:  # some variants printed a time before it failed: keep them, say so
        extra["ex88_exit"] = f"exit {p.returncode}: {_first_line(p.stderr) or 'no message'}"
    best = min(ok, key=lambda v: v["ms"])
    return cell.row(ms=best["ms"], ex88_variant=best["variant"], **extra)
