#!/usr/bin/env bash
# On a GPU machine: installs a CUDA wheel built elsewhere (scripts/wheel.sh) into a fresh venv beside
# the machine's PyTorch and runs the Python test suite against the installed package, GPU tests
# included, then the bundled CLI on the GPU. Needs no compiler, no CUDA toolkit and no network.
#   bash scripts/wheel_gpu_check.sh WHEEL
#   bash scripts/wheel_gpu_check.sh --build   builds the CUDA wheel here first (scripts/wheel.sh with
#                                             every core; CUTLASS_DIR must name CuTe's headers when
#                                             python3 has no nvidia-cutlass), then checks it
# Two device calls instead of one (each under the 10-minute limit; the build directory stays on a warm
# machine): `FLASHCORE_PYTHON=python3 bash scripts/wheel.sh`, then this script with dist/flashcore-*.whl.
# Environment: FLASHCORE_PYTHON (default python3: the interpreter with torch), OUT (default
# build/wheel-gpu-check; the logs go there). Prints the wheel's size, the install time, what the
# package reports, the test summary (GPU tests skipped would show in -rs) and the CLI runs.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
wheel="${1:?usage: scripts/wheel_gpu_check.sh WHEEL|--build}"
python="${FLASHCORE_PYTHON:-python3}"
out="${OUT:-$root/build/wheel-gpu-check}"
mkdir -p "$out"
if [ "$wheel" = "--build" ]; then
  FLASHCORE_PYTHON="$python" OUT_DIR="$out/dist" bash scripts/wheel.sh | grep -v '^ *\[' || exit 1
  wheel="$(ls "$out"/dist/flashcore-*.whl | head -1)"
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
venv="$scratch/venv"
unset FLASHCORE_LIBRARY
status=0

echo "=== wheel_gpu_check: $(basename "$wheel"): $(stat -c %s "$wheel") bytes ($(du -m "$wheel" | cut -f1) MiB)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
bash scripts/wheel_venv.sh "$python" "$venv" "$wheel" || exit 1
"$venv/bin/python" -m flashcore
"$venv/bin/python" -c 'import flashcore, sys, torch; assert flashcore.__file__.startswith(sys.prefix), flashcore.__file__; print("cuda available:", torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else "")'
"$venv/bin/flashcore" --version

echo "=== wheel_gpu_check: python/tests against the installed wheel"
start=$(date +%s)
"$venv/bin/python" -m pytest -q -rs -p no:cacheprovider python/tests >"$out/pytest.log" 2>&1 || status=1
grep -E "passed|failed|error|SKIPPED" "$out/pytest.log" | tail -25
echo "pytest: $(( $(date +%s) - start )) s"
# The backward and the options run on the sm80 family on an H100; the forward tests once more with
# that family forced, so both families' kernels in the wheel run.
FLASHCORE_KERNELS=sm80 "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests/test_cuda.py >"$out/pytest_sm80.log" 2>&1 || status=1
echo "FLASHCORE_KERNELS=sm80 test_cuda.py: $(tail -1 "$out/pytest_sm80.log")"

echo "=== wheel_gpu_check: the bundled CLI on the GPU"
"$venv/bin/flashcore" run --check | tail -3 || status=1
"$venv/bin/flashcore" run --seqlen 4096 --causal --backward --dtype bf16 --check | grep -E "shape|time|speed|PASS|FAIL" || status=1
"$venv/bin/flashcore" run --kernels sm80 --seqlen 2048 --check | grep -E "time|speed|PASS|FAIL" || status=1
"$venv/bin/flashcore" fuzz --device cuda --count 100 --seed 7 | tail -2 || status=1
echo "wheel_gpu_check: $([ $status -eq 0 ] && echo PASSED || echo FAILED)"
exit $status
