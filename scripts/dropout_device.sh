#!/usr/bin/env bash
# One device call for dropout (issue 16), on binaries built beforehand on a CPU machine:
#   prebuilt/flashcore_gpu_tests   the GPU suite
#   prebuilt/libflashcore_c.so     the C ABI library of the same build, for the Python tests and bench
# Built with: cmake -S . -B build/dev -G Ninja -DFLASHCORE_CUDA=ON -DFLASHCORE_CUDA_ARCHS=90-real
#   -DFLASHCORE_KERNEL_FAMILIES="$FAMILIES" -DFLASHCORE_HEAD_DIMS=128 -DFLASHCORE_DTYPES=bf16
#   -DFLASHCORE_BUILD_EXAMPLES=OFF -DCUTLASS_DIR=... -DFLASHCORE_GTEST_SOURCE_DIR=...;
#   ninja -C build/dev flashcore_gpu_tests flashcore_c; strip -g; copied into prebuilt/.
# FAMILIES (environment, default "sm80;sm90") says what the build holds; with sm90 the dropout
# tests also run with FLASHCORE_KERNELS=sm90 (the sm90 forward's option kernels, the backward's
# dropout kernels) and the sanitizers check those. The correctness steps run side by side (they
# time nothing); the bench runs alone at the end.
# Runs: the GPU dropout tests (auto and, with sm90, forced sm90), varlen's dropout cases, the
# dispatch tests, the score-option forward tests (the kernels dropout now shares), compute-sanitizer
# memcheck and racecheck of the dropout kernels on small grids, the Python dropout tests on CUDA,
# and bench/dropout_bench.py (JSON into $OUT).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-build/device-out}"
families="${FAMILIES:-sm80;sm90}"
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
t0=$(date +%s)
stamp() { echo "=== $1 (+$(( $(date +%s) - t0 )) s)"; }
summary() {
  echo "ok $(grep -c '^\[       OK \]' "$1"), failed $(grep -c '^\[  FAILED  \].*(' "$1"), skipped $(grep -c '^\[  SKIPPED \]' "$1")"
  grep -E '^\[  FAILED  \].*\(' "$1" | head -20; grep -E "tests ran" "$1"
  grep -B2 -A8 "Failure" "$1" | head -40
}
tests=prebuilt/flashcore_gpu_tests
# Only bf16 and d <= 128 are in the build (d40/d64/d96 run padded on the d128 kernels).
auto_filter='*CudaDropout*bf16*:*CudaDropoutDispatch*:*Varlen*dropout*bf16*:*CudaScoreOptions*Forward*bf16*:-*d256*:*fp16*'
# Forced sm90: the forward serves every case; the backward's dropout kernels serve dropout alone.
sm90_filter='*CudaDropout.Forward*bf16*:*CudaDropout.Backward*bf16*:-*d256*:*fp16*:*all_options*Backward*:*Backward*all_options*'
small='*CudaDropout*p90_d64_small_bf16*:*CudaDropout*p50_q_longer_d64_bf16*:*CudaDropout*p30_causal_gqa_d128_bf16*'

stamp "correctness, side by side"
timeout 100 "$tests" --gtest_filter="$auto_filter" >"$out/gpu_tests_auto.log" 2>&1 &
if [[ "$families" == *sm90* ]]; then
  FLASHCORE_KERNELS=sm90 timeout 100 "$tests" --gtest_filter="$sm90_filter" >"$out/gpu_tests_sm90.log" 2>&1 &
  FLASHCORE_KERNELS=sm90 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$tests" \
    --gtest_filter="$small" >"$out/memcheck.log" 2>&1 &
  FLASHCORE_KERNELS=sm90 timeout 100 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 9 \
    "$tests" --gtest_filter="$small" >"$out/racecheck.log" 2>&1 &
fi
(
  export FLASHCORE_LIBRARY="$PWD/prebuilt/libflashcore_c.so" PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1
  timeout 100 python3 -m pytest -q -p no:cacheprovider python/tests/test_dropout.py -k "cuda and not fp16" 2>&1 | tail -8
) >"$out/python_dropout.log" 2>&1 &
wait
stamp "gpu tests, kernels=auto"; summary "$out/gpu_tests_auto.log"
if [[ "$families" == *sm90* ]]; then
  stamp "gpu tests, FLASHCORE_KERNELS=sm90"; summary "$out/gpu_tests_sm90.log"
  stamp "memcheck"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$out/memcheck.log" | head
  stamp "racecheck"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|tests ran|PASSED|FAILED" "$out/racecheck.log" | head
fi
stamp "python dropout tests on CUDA"; cat "$out/python_dropout.log"

stamp "bench: flashcore vs SDPA FLASH_ATTENTION with dropout"
export FLASHCORE_LIBRARY="$PWD/prebuilt/libflashcore_c.so" PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1
export FLASHCORE_BUILD_NOTE="flashcore build: ${families} families, d128 bf16, sm_90a/sm_90 (${FLASHCORE_COMMIT:-})"
timeout 100 python3 bench/dropout_bench.py "$out/dropout_bench.json" 2>&1 | tail -60
stamp done
