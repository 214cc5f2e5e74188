#!/usr/bin/env bash
# One device call for dropout (issue 16), on binaries built beforehand on a CPU machine:
#   prebuilt/flashcore_gpu_tests   the GPU suite (sm80 family, d64/d128, bf16)
#   prebuilt/libflashcore_c.so     the C ABI library of the same build, for the Python tests and bench
# Built with: cmake -S . -B build/dev -G Ninja -DFLASHCORE_CUDA=ON -DFLASHCORE_CUDA_ARCHS=90-real
#   -DFLASHCORE_KERNEL_FAMILIES=sm80 "-DFLASHCORE_HEAD_DIMS=64;128" -DFLASHCORE_DTYPES=bf16
#   -DFLASHCORE_BUILD_EXAMPLES=OFF -DCUTLASS_DIR=... -DFLASHCORE_GTEST_SOURCE_DIR=...;
#   ninja -C build/dev flashcore_gpu_tests flashcore_c; strip -g; copied into prebuilt/.
# Runs: the GPU dropout tests (and varlen, which has dropout cases, and the dispatch tests), a
# compute-sanitizer memcheck of the dropout kernels on small grids, the Python dropout tests on
# CUDA, and bench/dropout_bench.py (JSON into $OUT).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-build/device-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
t0=$(date +%s)
stamp() { echo "=== $1 (+$(( $(date +%s) - t0 )) s)"; }
summary() {
  echo "ok $(grep -c '^\[       OK \]' "$1"), failed $(grep -c '^\[  FAILED  \].*(' "$1"), skipped $(grep -c '^\[  SKIPPED \]' "$1")"
  grep -E '^\[  FAILED  \].*\(' "$1" | head -20; grep -E "tests ran" "$1"
}

stamp "gpu tests: dropout (bf16; d256 and fp16 are not in this build), varlen, dispatch"
timeout 120 prebuilt/flashcore_gpu_tests \
  --gtest_filter='*CudaDropout*bf16*:*CudaDropoutDispatch*:*Varlen*bf16*:*Varlen*dropout*:-*d256*:*fp16*' \
  >"$out/gpu_tests_dropout.log" 2>&1
echo "rc $?"; summary "$out/gpu_tests_dropout.log"
grep -A6 "Failure" "$out/gpu_tests_dropout.log" | head -40

stamp "gpu tests: the score-option kernels without dropout still pass (bf16)"
timeout 60 prebuilt/flashcore_gpu_tests --gtest_filter='*CudaScoreOptions*bf16*:-*d256*:*d96*:*fp16*:*d32*' \
  >"$out/gpu_tests_other.log" 2>&1
echo "rc $?"; summary "$out/gpu_tests_other.log"

stamp "compute-sanitizer memcheck: dropout kernels, small grids"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 prebuilt/flashcore_gpu_tests \
  --gtest_filter='*CudaDropout*p90_d64_small_bf16*:*CudaDropout*p50_q_longer_d64_bf16*:*CudaDropoutDispatch*' \
  >"$out/memcheck.log" 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$out/memcheck.log" | head

export FLASHCORE_LIBRARY="$PWD/prebuilt/libflashcore_c.so" PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1
stamp "python dropout tests on CUDA (bf16)"
timeout 60 python3 -m pytest -q -p no:cacheprovider python/tests/test_dropout.py -k "cuda and not fp16" 2>&1 | tail -8

stamp "bench: flashcore vs SDPA FLASH_ATTENTION with dropout"
timeout 150 python3 bench/dropout_bench.py "$out/dropout_bench.json" 2>&1 | tail -60
stamp done
