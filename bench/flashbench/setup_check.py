"""The set-up check scripts/bench.sh runs before the benchmark: what is present, what each missing
piece costs. Exits 1 only when nothing could be measured (no PyTorch with CUDA)."""
import argparse
import importlib
import os
import shutil
import subprocess
import sys

from . import context, ex88, ladder_cli, ncu, options


def _line(ok, what, detail):
    print(f"  [{'ok' if ok else '--'}] {what}: {detail}")


def main(argv=None):
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--cli", default=os.path.join(options.REPO_ROOT, "build", "sm90-sm90a", "tools", "flashcore"))
    p.add_argument("--commit")
    p.add_argument("--ex88", default=os.environ.get("EX88_BIN") or os.path.join(options.REPO_ROOT, ".carry", "ex88",
                                                                              "88_hopper_fmha"))
    p.add_argument("--dry-run", action="store_true")
    args, _ = p.parse_known_args(argv)
    print("bench set-up check:")
    smi = shutil.which("nvidia-smi")
    gpus = None
    if smi:
        try:
            gpus = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError) as e:
            gpus = f"nvidia-smi failed: {e}"
    _line(bool(gpus), "GPU", (gpus or "nvidia-smi not found").splitlines()[0] if gpus else "nvidia-smi not found")
    fatal = False
    try:
        torch = importlib.import_module("torch")
        cuda = torch.cuda.is_available()
        detail = f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}"
        if cuda:
            detail += f", device 0: {torch.cuda.get_device_name(0)}"
        _line(cuda, "PyTorch", detail if cuda else detail + ": no CUDA device visible")
        fatal = not cuda
        try:
            from torch.nn.attention import SDPBackend  # noqa: F401
            _line(True, "SDPA backends", "torch.nn.attention.sdpa_kernel available")
        except ImportError as e:
            _line(False, "SDPA backends", f"torch.nn.attention missing ({e}): SDPA rows will be blank")
    except Exception as e:
        _line(False, "PyTorch", f"import failed: {e}")
        fatal = True
    try:
        import matplotlib
        _line(True, "matplotlib", matplotlib.__version__)
    except Exception as e:
        _line(False, "matplotlib", f"{e}: no charts (redraw later with bench/plot.py)")
    try:
        import flashcore
        _line(hasattr(flashcore, "flash_attn_func"), "flashcore package", getattr(flashcore, "__file__", "?"))
    except Exception as e:
        _line(False, "flashcore package", f"{type(e).__name__}: {e}: flashcore cells will be blank")
    missing = ladder_cli.cli_missing(args.cli)
    _line(missing is None, "flashcore CLI", missing or args.cli)
    missing = ex88.missing(args.ex88)
    info = ex88.build_info(args.ex88) or {}
    _line(missing is None, "CUTLASS example 88 (cutlass_ex88)",
          missing or f"{args.ex88} ({info.get('build_info', 'no build record')})")
    kernels_env = os.environ.get("FLASHCORE_KERNELS")
    if kernels_env:
        _line(True, "FLASHCORE_KERNELS", f"{kernels_env} in the environment: the benchmark sets it per flashcore "
                                         f"impl (auto for `flashcore`), so it reaches no row")
    found = ncu.find_ncu()
    _line(found is not None, "ncu (for bench/ncu_profile.py only)", found or "not found")
    info = context.commit_info(args.commit)
    _line(info["commit"] != "unknown", "commit", f"{info['commit']} ({info['commit_source']})" + (
        "" if info["commit"] != "unknown" else ": pass --commit SHA or COMMIT=SHA"))
    if fatal and not args.dry_run:
        print("bench: cannot measure anything without PyTorch and a CUDA device", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
