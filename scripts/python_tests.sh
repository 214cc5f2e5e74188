#!/usr/bin/env bash
# The Python package's test suite: puts torch, pytest and scikit-build-core into the project's
# .venv (once), installs the package the standard way (`pip install ./python`, which builds
# libflashcore_c with CMake), and runs pytest over python/tests. CUDA tests skip, saying why, where
# there is no GPU.
#
# torch comes from PyPI: its Linux wheel is a CUDA build whose nvidia-* dependencies (about 4.5 GB
# installed) its libraries link against, so they are installed too; that takes about 75 s here. It
# runs on the CPU when there is no GPU.
#
# Environment:
#   FLASHCORE_PYTHON   the interpreter to use (default .venv/bin/python). On a machine whose Python
#                      already has torch >= 2.4, pytest and scikit-build-core (the GPU device's
#                      python3), nothing is downloaded.
#   CMAKE_ARGS         extra CMake arguments for the package's build, e.g.
#                      "-DFLASHCORE_CUDA_ARCHS=90-real" for a Hopper-only build of the kernels.
# Without a GPU the package is built CPU-only (FLASHCORE_CUDA=OFF): there is nothing to run the
# kernels on, and scripts/test.sh already compiles them.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${FLASHCORE_PYTHON:-$root/.venv/bin/python}"
[ -n "${FLASHCORE_PYTHON:-}" ] || bash scripts/setup.sh
pip_install=("$python" -m pip install -q --disable-pip-version-check)

if ! "$python" -c 'import torch, pytest, scikit_build_core' 2>/dev/null; then
  echo "python_tests: installing torch 2.11.0, pytest and scikit-build-core into $("$python" -c 'import sys; print(sys.prefix)')"
  start=$(date +%s)
  "${pip_install[@]}" torch==2.11.0 numpy==2.4.6 pytest==9.2.0 scikit-build-core==1.1.2
  echo "python_tests: installed in $(( $(date +%s) - start )) s"
fi

build_args=()
if ! bash scripts/have_gpu.sh; then
  build_args+=(-C cmake.define.FLASHCORE_CUDA=OFF)
fi
start=$(date +%s)
# No build isolation: the build requirements are already in this environment, so nothing is fetched.
"${pip_install[@]}" --no-build-isolation "${build_args[@]}" ./python
echo "python_tests: package built and installed in $(( $(date +%s) - start )) s"

# Run from the repository root: the installed package is imported, not python/flashcore (which has
# no library inside).
"$python" -m pytest -rs python/tests
