#!/usr/bin/env bash
# The test suite: set up, build everything (the CUDA kernels too when nvcc is present, so a compile
# error cannot land), run ctest. GPU tests skip, saying why, where there is no GPU.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
# CI (CI=true) compiles each kernel file once (sm80 family for sm_80, sm90 family for sm_90a): every file still compiles, in half the time.
default_preset=default
[ "${CI:-}" = "true" ] && default_preset=sm80-sm90a
preset="${FLASHCORE_PRESET:-$default_preset}"
cmake --preset "$preset"
cmake --build --preset "$preset"
ctest --preset "$preset"
if ! bash scripts/have_gpu.sh; then
  echo "test: the gpu.* tests were skipped: no NVIDIA GPU on this machine (run scripts/device.sh on one)"
fi
# The Python tests: on a GPU machine against a CUDA build of the package (python_tests.sh); everywhere
# against the CPU-only wheel installed in a fresh venv, with the CMake package and
# examples/consumer (package_tests.sh).
if bash scripts/have_gpu.sh; then
  bash scripts/python_tests.sh
fi
bash scripts/package_tests.sh
