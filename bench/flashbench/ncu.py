"""Nsight Compute profile of flashcore's kernels for one shape, through the C++ CLI.

Runs `ncu --clock-control none` with the SpeedOfLight, LaunchStats and Occupancy sections plus the
tensor-pipe and local-memory metrics this ncu knows (asked with --query-metrics first, so an
unknown name cannot fail the run), exports a report, re-imports it as CSV (`--page raw`) and keeps,
per kernel, the medians over its launches.
"""
import csv
import glob
import io
import os
import re
import shutil
import statistics
import subprocess
import tempfile

# (field, candidate metric names, first present wins). Units are ncu's base units (--print-units base).
FIELDS = (
    ("duration_ns", ("gpu__time_duration.sum",)),
    ("tensor_pipe_pct", ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                         "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
                         "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active")),
    ("tensor_gmma_pct", ("sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",)),
    ("tensor_hmma_pct", ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",)),
    ("sm_throughput_pct", ("sm__throughput.avg.pct_of_peak_sustained_elapsed",)),
    ("memory_throughput_pct", ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",)),
    ("dram_throughput_pct", ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                             "dram__throughput.avg.pct_of_peak_sustained_elapsed")),
    ("dram_bytes_per_s", ("dram__bytes.sum.per_second",)),
    ("registers_per_thread", ("launch__registers_per_thread",)),
    ("shared_mem_static_bytes", ("launch__shared_mem_per_block_static",)),
    ("shared_mem_dynamic_bytes", ("launch__shared_mem_per_block_dynamic",)),
    ("block_size", ("launch__block_size",)),
    ("grid_size", ("launch__grid_size",)),
    ("achieved_occupancy_pct", ("sm__warps_active.avg.pct_of_peak_sustained_active",)),
    ("theoretical_occupancy_pct", ("sm__maximum_warps_per_active_cycle_pct",)),
    ("local_load_instructions", ("smsp__sass_inst_executed_op_local_ld.sum", "sm__sass_inst_executed_op_local_ld.sum")),
    ("local_store_instructions", ("smsp__sass_inst_executed_op_local_st.sum", "sm__sass_inst_executed_op_local_st.sum")),
)
SECTIONS = ("SpeedOfLight", "LaunchStats", "Occupancy")
# Not in those sections: asked for by name when this ncu lists them.
EXTRA_METRICS = tuple(sorted({m for f, names in FIELDS for m in names
                              if f.startswith(("tensor", "local", "dram_bytes")) or m.startswith("dram__throughput")}))


def find_ncu(explicit=None):
    if explicit:
        return explicit if os.path.exists(explicit) or shutil.which(explicit) else None
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in ("/usr/local/cuda/bin/ncu", "/usr/local/cuda-*/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu"):
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def _run(cmd, timeout):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s: {' '.join(cmd)}"
    except OSError as e:
        return None, f"could not start {cmd[0]}: {e}"
    return p, None


def version(ncu):
    p, _ = _run([ncu, "--version"], 60)
    return p.stdout.strip().splitlines()[-1] if p and p.stdout.strip() else None


def available_metrics(ncu):
    """Base metric names this ncu lists for the GPU here, or None when it cannot say."""
    p, _ = _run([ncu, "--query-metrics"], 120)
    if p is None or p.returncode != 0:
        return None
    names = set(re.findall(r"^([a-z0-9]+__[A-Za-z0-9_]+)", p.stdout, flags=re.M))
    return names or None


def explain_failure(text):
    if "ERR_NVGPUCTRPERM" in text:
        return ("ncu may not read the GPU's performance counters here (ERR_NVGPUCTRPERM): run as root or "
                "with the driver option NVreg_RestrictProfilingToAdminUsers=0")
    lines = [l for l in text.strip().splitlines() if l.strip()]
    errors = [l for l in lines if "ERROR" in l or "error" in l]
    return " | ".join((errors or lines)[-3:])[:600] if lines else "no output"


def _number(text):
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None


_TIME_TO_NS = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9}
_SI = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def to_base_units(value, unit):
    """Times to nanoseconds and bytes (or bytes/second) to plain bytes, in case ncu printed scaled
    units (an ncu without --print-units base)."""
    if value is None:
        return None
    unit = (unit or "").strip()
    if unit in _TIME_TO_NS:
        return value * _TIME_TO_NS[unit]
    if unit[:1] in _SI and unit[1:].startswith("byte"):
        return value * _SI[unit[:1]]
    return value


def parse_raw_csv(text):
    """[{column: (value, unit)}] from `ncu --import ... --csv --page raw`: a header of metric names,
    a row of units, then one row per kernel launch. Lines before the header (ncu's notices) are skipped."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"') or l.startswith("ID,")), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    if len(rows) < 2:
        return []
    header, units, launches = rows[0], rows[1], rows[2:]
    # The units row has an empty ID; some versions omit it.
    if units and units[0].strip() not in ("", "ID") and _number(units[0]) is not None:
        launches, units = rows[1:], [""] * len(header)
    return [{h: (v, u) for h, v, u in zip(header, r, units)} for r in launches if len(r) == len(header)]


def short_name(name):
    name = re.sub(r"^void\s+", "", name.strip())
    return re.split(r"[<(]", name, maxsplit=1)[0] or name


def summarise(launches):
    """Per kernel name: launches and the median of each field over them."""
    by_kernel = {}
    for launch in launches:
        name = (launch.get("Kernel Name") or launch.get("Function Name") or ("?", ""))[0]
        by_kernel.setdefault(name, []).append(launch)
    kernels = []
    for name, runs in by_kernel.items():
        entry = {"name": short_name(name), "full_name": name[:400], "launches": len(runs), "metrics_used": {}}
        for field, candidates in FIELDS:
            for metric in candidates:
                values = [to_base_units(_number(r[metric][0]), r[metric][1]) for r in runs if metric in r]
                values = [v for v in values if v is not None]
                if values:
                    entry[field] = statistics.median(values)
                    entry["metrics_used"][field] = metric
                    break
            else:
                entry[field] = None
        local = (entry.get("local_load_instructions") or 0) + (entry.get("local_store_instructions") or 0)
        entry["local_memory_used"] = local > 0 if entry["metrics_used"].keys() & {
            "local_load_instructions", "local_store_instructions"} else None
        kernels.append(entry)
    kernels.sort(key=lambda k: -(k.get("duration_ns") or 0))
    return kernels


def profile(ncu, target_cmd, launch_count, kernel_regex, timeout_s, keep_report_dir=None):
    """{kernels, metrics_requested, metrics_unavailable, ncu_command} or {error}."""
    known = available_metrics(ncu)
    wanted = list(EXTRA_METRICS)
    requested = [m for m in wanted if known is None or m.split(".")[0] in known]
    unavailable = [m for m in wanted if m not in requested]
    workdir = keep_report_dir or tempfile.mkdtemp(prefix="flashcore-ncu-")
    report = os.path.join(workdir, "flashcore_profile")
    cmd = [ncu, "--clock-control", "none", "--target-processes", "all", "--launch-count", str(launch_count)]
    for section in SECTIONS:
        cmd += ["--section", section]
    if requested:
        cmd += ["--metrics", ",".join(requested)]
    if kernel_regex:
        cmd += ["--kernel-name", f"regex:{kernel_regex}"]
    cmd += ["-f", "-o", report] + list(target_cmd)
    result = {"ncu_command": " ".join(cmd), "metrics_requested": requested, "metrics_unavailable": unavailable,
              "metrics_listed_by_ncu": known is not None}
    p, err = _run(cmd, timeout_s)
    if p is not None and p.returncode != 0 and requested and "metric" in (p.stdout + p.stderr).lower():
        # A metric this ncu lists but refuses: the sections alone still give most of the table.
        cmd = [c for c in cmd if c not in ("--metrics", ",".join(requested))]
        result.update(ncu_command=" ".join(cmd), metrics_unavailable=wanted, metrics_requested=[])
        p, err = _run(cmd, timeout_s)
    if p is None:
        return {**result, "error": err}
    if p.returncode != 0 or not os.path.exists(report + ".ncu-rep"):
        return {**result, "error": f"ncu exit {p.returncode}: {explain_failure(p.stdout + p.stderr)}"}
    base = [ncu, "--import", report + ".ncu-rep", "--csv", "--page", "raw"]
    imp, err = _run(base + ["--print-units", "base"], 300)
    if imp is None or imp.returncode != 0:
        imp, err = _run(base, 300)
    if imp is None or imp.returncode != 0:
        return {**result, "error": err or f"ncu --import failed: {explain_failure(imp.stdout + imp.stderr)}"}
    kernels = summarise(parse_raw_csv(imp.stdout))
    if not keep_report_dir:
        shutil.rmtree(workdir, ignore_errors=True)
    if not kernels:
        return {**result, "error": "ncu profiled no kernel (is the CLI running on the GPU?)",
                "target_output_tail": (p.stdout + p.stderr)[-1500:]}
    return {**result, "kernels": kernels}


def markdown(data):
    ctx = data.get("context", {})
    out = [f"# Nsight Compute profile {data.get('name', '')}", "",
           f"{ctx.get('smi_name', '?')}, driver {ctx.get('smi_driver_version', '?')}, SM clock {ctx.get('smi_clocks_sm', '?')}"
           f" (max {ctx.get('smi_clocks_max_sm', '?')}), {data.get('ncu_version', '?')}; commit {ctx.get('commit', '?')}; "
           f"{ctx.get('time_utc', '')}.", "", f"Target: `{' '.join(data.get('target', []))}`", "",
           f"ncu: `{data.get('ncu_command', '')}`", ""]
    if data.get("error"):
        return "\n".join(out + [f"**Not profiled**: {data['error']}", ""])
    out += ["| kernel | launches | time (us) | tensor pipe % | SM thr. % | DRAM thr. % | regs/thread | smem static+dyn (KiB) | occupancy ach./theor. % | local ld/st (spills) |",
            "|---|---|---|---|---|---|---|---|---|---|"]

    def f(v, fmt="{:.1f}"):
        return "-" if v is None else fmt.format(v)
    for k in data.get("kernels", []):
        smem = None
        if k.get("shared_mem_static_bytes") is not None or k.get("shared_mem_dynamic_bytes") is not None:
            smem = ((k.get("shared_mem_static_bytes") or 0) + (k.get("shared_mem_dynamic_bytes") or 0)) / 1024
        local = "-" if k.get("local_memory_used") is None else (
            f"{f(k.get('local_load_instructions'), '{:.0f}')}/{f(k.get('local_store_instructions'), '{:.0f}')}")
        out.append(f"| `{k['name']}` | {k['launches']} | {f(k['duration_ns'] / 1e3 if k.get('duration_ns') else None)} | "
                   f"{f(k.get('tensor_pipe_pct'))} | {f(k.get('sm_throughput_pct'))} | {f(k.get('dram_throughput_pct'))} | "
                   f"{f(k.get('registers_per_thread'), '{:.0f}')} | {f(smem)} | "
                   f"{f(k.get('achieved_occupancy_pct'))}/{f(k.get('theoretical_occupancy_pct'))} | {local} |")
    if data.get("metrics_unavailable"):
        out += ["", f"Metrics this ncu does not list: {', '.join(data['metrics_unavailable'])}."]
    return "\n".join(out) + "\n"
