"""The small-shape latency of implementations only the C++ CLI reaches: the teaching-ladder rungs
(`--impl naive|algo1|wmma`) and flashcore's default path (no --impl). The CLI times itself (median
and p90 over --repeats runs) and prints one JSON object with --json."""
import json
import os
import subprocess

# Accepted spellings of the CLI's timing keys, first match wins.
_P50_KEYS = ("ms", "ms_p50", "median_ms", "p50_ms", "time_ms")
_P90_KEYS = ("ms_p90", "p90_ms")


def cli_missing(cli):
    if not cli:
        return "no CLI given (--cli)"
    if not os.path.isfile(cli):
        return (f"CLI not found at {cli} (build it: cmake --preset sm90-sm90a && "
                f"cmake --build --preset sm90-sm90a --target flashcore_cli)")
    if not os.access(cli, os.X_OK):
        return f"CLI at {cli} is not executable"
    return None


def _last_json_object(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    try:
        value = json.loads(text)
        return value if isinstance(value, dict) else None
    except json.JSONDecodeError:
        return None


def _first(d, keys):
    for k in keys:
        if isinstance(d.get(k), (int, float)):
            return float(d[k])
    return None


def run_once(cli, cell, dtype, runs, warmup, timeout_s):
    """(parsed JSON, None) or (None, reason)."""
    cmd = [cli, "run", "--device", "cuda"]
    if cell.impl != "flashcore_cli":
        cmd += ["--impl", cell.impl]
    cmd += ["--batch", str(cell.batch), "--heads", str(cell.heads), "--seqlen", str(cell.seqlen_q),
            "--head-dim", str(cell.head_dim), "--dtype", dtype, "--json", "--repeats", str(runs),
            "--warmup", str(warmup)]
    if cell.causal:
        cmd.append("--causal")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None, f"CLI timed out after {timeout_s:.0f} s: {' '.join(cmd)}"
    except OSError as e:
        return None, f"CLI failed to start: {e}"
    if p.returncode != 0:
        msg = (p.stderr.strip() or p.stdout.strip()).splitlines()
        return None, f"CLI exit {p.returncode}: {msg[0][:300] if msg else 'no output'}"
    parsed = _last_json_object(p.stdout)
    if parsed is None or _first(parsed, _P50_KEYS) is None:
        return None, f"CLI printed no JSON object with a time ({'/'.join(_P50_KEYS)}): {p.stdout.strip()[:200]!r}"
    return parsed, None


def measure(cli, cell, runs, warmup, timeout_s):
    """The row for one CLI cell. Scalar rungs may accept only fp32: after an fp16 refusal the rung
    is run in fp32 and the row says so in its dtype."""
    missing = cli_missing(cli)
    if missing:
        return cell.row(reason=missing, via="cli")
    parsed, reason = run_once(cli, cell, cell.dtype, runs, warmup, timeout_s)
    dtype = cell.dtype
    if parsed is None and cell.impl != "flashcore_cli" and "timed out" not in reason:
        parsed, reason32 = run_once(cli, cell, "fp32", runs, warmup, timeout_s)
        if parsed is None:
            reason = f"{cell.dtype}: {reason}; fp32: {reason32}"
        else:
            dtype = "fp32"
    if parsed is None:
        return cell.row(reason=reason, via="cli")
    row = cell.row(ms=_first(parsed, _P50_KEYS), via="cli", ms_p90=_first(parsed, _P90_KEYS), runs=runs,
                   cli_output=parsed)
    row["dtype"] = dtype
    return row
