#!/usr/bin/env bash
# The test suite: set up, build everything (the CUDA kernels too when nvcc is present, so a compile
# error cannot land), run ctest. GPU tests skip, saying why, where there is no GPU.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
preset="${FLASHCORE_PRESET:-default}"
cmake --preset "$preset"
cmake --build --preset "$preset"
ctest --preset "$preset"
