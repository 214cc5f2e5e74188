"""The run's context: device, clocks, driver, library versions, commit, date."""
import datetime
import os
import platform
import re
import subprocess

from .options import REPO_ROOT

_SMI_FIELDS = ("uuid", "name", "clocks.sm", "clocks.max.sm", "clocks.mem", "clocks.max.mem", "driver_version",
               "power.draw", "power.limit", "temperature.gpu", "pstate", "persistence_mode")


def _run(cmd, timeout=20, cwd=None):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except (OSError, subprocess.SubprocessError) as e:
        return None, str(e)
    if p.returncode != 0:
        return None, (p.stderr or p.stdout).strip()[:300]
    return p.stdout, None


_SMI_FIELDS_MINIMAL = ("uuid", "name", "clocks.sm", "clocks.max.sm", "clocks.mem", "driver_version")


def nvidia_smi(uuid=None):
    """One GPU's fields from nvidia-smi (the one whose UUID matches torch's device, else the first).
    A driver that rejects one of the fields gets asked for the minimal set."""
    for fields in (_SMI_FIELDS, _SMI_FIELDS_MINIMAL):
        out, err = _run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"])
        if out is not None:
            break
    if out is None:
        return {"nvidia_smi_error": err}
    gpus = [dict(zip(fields, (v.strip() for v in line.split(",")))) for line in out.strip().splitlines()]
    if not gpus:
        return {"nvidia_smi_error": "no GPU listed"}
    want = (uuid or "").lower().replace("gpu-", "")
    chosen = next((g for g in gpus if want and g["uuid"].lower().replace("gpu-", "") == want), gpus[0])
    return {f"smi_{k.replace('.', '_')}": v for k, v in chosen.items()}


def commit_info(explicit=None):
    """The commit the code came from: an explicit value, then $FLASHCORE_COMMIT / $COMMIT, then git,
    then a COMMIT file at the repository root. The environment wins over git because the device's
    copy of the tree may carry a stale .git (seen 2026-11-22: HEAD of an older commit, reported dirty)."""
    if explicit:
        return {"commit": explicit, "commit_source": "option"}
    for var in ("FLASHCORE_COMMIT", "COMMIT"):
        if os.environ.get(var):
            return {"commit": os.environ[var].strip(), "commit_source": f"env {var}"}
    out, _ = _run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT)
    if out:
        status, _ = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT)
        return {"commit": out.strip(), "commit_source": "git", "dirty": bool(status and status.strip())}
    path = os.path.join(REPO_ROOT, "COMMIT")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return {"commit": f.read().strip(), "commit_source": "file COMMIT"}
    return {"commit": "unknown", "commit_source": "none"}


def torch_context(torch):
    props = torch.cuda.get_device_properties(0)
    ctx = {
        "device": props.name,
        "sm_count": props.multi_processor_count,
        "compute_capability": f"{props.major}.{props.minor}",
        "total_memory_gib": round(props.total_memory / 2**30, 2),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    try:
        import triton
        ctx["triton"] = triton.__version__
    except Exception as e:  # triton is optional: only recorded
        ctx["triton"] = f"not importable: {e}"
    ctx.update(nvidia_smi(str(getattr(props, "uuid", "")) or None))
    return ctx


def base_context(mode, explicit_commit=None):
    now = datetime.datetime.now(datetime.timezone.utc)
    ctx = {"date": now.strftime("%Y-%m-%d"), "time_utc": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "mode": mode,
           "python": platform.python_version(), "host": platform.node()}
    ctx.update(commit_info(explicit_commit))
    return ctx


def run_name(ctx):
    """e.g. h100-80gb-hbm3_2026-11-22_26f71f5"""
    device = ctx.get("device") or ctx.get("smi_name") or "unknown-device"
    slug = re.sub(r"[^a-z0-9]+", "-", device.lower().replace("nvidia", "")).strip("-") or "gpu"
    commit = ctx.get("commit", "unknown")
    short = commit[:7] if re.fullmatch(r"[0-9a-f]{7,40}", commit) else re.sub(r"[^A-Za-z0-9]+", "", commit)[:12]
    return f"{slug}_{ctx.get('date', 'undated')}_{short or 'unknown'}"
