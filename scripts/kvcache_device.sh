#!/usr/bin/env bash
# Issue 19's device run, in one call: the forward_kvcache GPU tests (tensor-core decode kernel, and
# the FP32-FMA one on a subset), compute-sanitizer memcheck on small cases, the Python tests on
# CUDA, and the decode benchmark (bench/kvcache_decode.py). Runs on binaries built beforehand
# (BIN, default build/devkv: a trimmed build, FLASHCORE_PASSES=decode), so the GPU's time goes to
# running, not compiling. Logs and JSON go to $OUT (the device tool's return folder).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${OUT:-$root/build/device-out}"
mkdir -p "$out"
bin="${BIN:-build/devkv}"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export FLASHCORE_LIBRARY="$root/$bin/libflashcore_c.so"
tests="$root/$bin/flashcore_gpu_tests"
log="$out/steps.txt"
step() { echo "=== $* ($(date +%T))" | tee -a "$log"; }

step gpu
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$log"
step "gpu tests, tensor-core decode kernel"
timeout 120 "$tests" --gtest_filter='*KvCache*' >"$out/gpu_tests_mma.txt" 2>&1
echo "rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$out/gpu_tests_mma.txt" | tr '\n' ' ')" | tee -a "$log"
grep -E '^\[  FAILED  \]' "$out/gpu_tests_mma.txt" | head -20 | tee -a "$log"
step "gpu tests, FP32-FMA decode kernel (subset)"
FLASHCORE_DECODE_KERNEL=fma timeout 90 "$tests" --gtest_filter='*KvCache*bf16*:*KvCacheSanitize*:*KvCacheValidation*' \
  >"$out/gpu_tests_fma.txt" 2>&1
echo "rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$out/gpu_tests_fma.txt" | tr '\n' ' ')" | tee -a "$log"
grep -E '^\[  FAILED  \]' "$out/gpu_tests_fma.txt" | head -10 | tee -a "$log"
step "compute-sanitizer memcheck"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 "$tests" \
  --gtest_filter='CudaKvCacheSanitize*:CudaKvCacheValidation*:Cases/CudaKvCache.MatchesReferenceAndAppends/paged_1_gqa_bf16_splits3:Cases/CudaKvCache.MatchesReferenceAndAppends/speculative_causal_sq4_fp16' \
  >"$out/memcheck.txt" 2>&1
echo "rc=$? $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' "$out/memcheck.txt" | tr '\n' ' ')" | tee -a "$log"
step "python tests on cuda"
PYTHONPATH=python timeout 90 python3 -m pytest -q -p no:cacheprovider python/tests/test_kvcache.py -k cuda \
  >"$out/pytest.txt" 2>&1
echo "rc=$? $(tail -1 "$out/pytest.txt")" | tee -a "$log"
step "decode benchmark"
PYTHONPATH=python timeout 150 python3 bench/kvcache_decode.py --append --out "$out/bench.json" 2>&1 | tee -a "$log"
step "decode benchmark, FP32-FMA kernel"
FLASHCORE_DECODE_KERNEL=fma PYTHONPATH=python timeout 60 python3 bench/kvcache_decode.py --skip-sdpa --label _fma \
  --out "$out/bench_fma.json" 2>&1 | tee -a "$log"
step done
