"""What the installed package says about itself: build_info(), kernel_families, `python -m
flashcore`, and the bundled CLI behind the `flashcore` console script (when the package was
installed from a wheel or `pip install ./python`; a development run through FLASHCORE_LIBRARY has no
bundled CLI)."""

import re
import subprocess
import sys

import pytest

import flashcore


def bundled_cli():
    """The CLI the `flashcore` console script runs, or None where there is none."""
    try:
        import flashcore_cli
    except ImportError:
        return None
    path = flashcore_cli.cli_path()
    return path if path is not None and path.is_file() else None


def test_build_info_is_consistent():
    info = flashcore.build_info()
    assert info["version"] == flashcore.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", info["version"])
    assert info["with_cuda"] == flashcore.built_with_cuda()
    assert info["kernel_families"] == flashcore.kernel_families
    assert all(family in ("sm80", "sm90") for family in flashcore.kernel_families)
    # A CUDA build holds at least one family and says what it was compiled for; a CPU build none.
    assert bool(flashcore.kernel_families) == info["with_cuda"]
    assert bool(info["cuda_version"]) == info["with_cuda"]
    for family in flashcore.kernel_families:
        assert f"{family}: sm_" in info["cuda_architectures"]


def test_python_m_flashcore_reports_the_build():
    out = subprocess.run([sys.executable, "-m", "flashcore"], check=True, capture_output=True, text=True).stdout
    assert out.startswith(f"flashcore {flashcore.__version__}\n")
    assert "kernel families" in out


def test_bundled_cli_reports_the_same_build():
    cli = bundled_cli()
    if cli is None:
        pytest.skip("no bundled CLI: this flashcore was not installed from a wheel or `pip install ./python`")
    out = subprocess.run([str(cli), "--version"], check=True, capture_output=True, text=True).stdout
    assert out.startswith(f"flashcore {flashcore.__version__}\n")
    families = " ".join(flashcore.kernel_families) or "none"
    assert re.search(rf"kernel families  {re.escape(families)}", out), out
