#!/usr/bin/env bash
# The main job: set up, build, and run the CLI's default attention (B=2, S=1024, H=12, D=64, fp16)
# with a check against the float64 reference: on the GPU when there is one, else on the CPU.
# Extra arguments go to `flashcore run` (e.g. --seqlen 4096 --causal --backward).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
if bash scripts/have_gpu.sh && command -v nvcc >/dev/null; then
  preset=default
else
  echo "run: no GPU here: building the CPU backend only"
  preset=cpu
fi
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" --target flashcore_cli
"build/$preset/tools/flashcore" run --check "$@"
