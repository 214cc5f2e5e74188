#!/usr/bin/env bash
# Session 9's flash_attn drop-in checks (docs/flash_attn_compat.md, "Session 9") in one device call:
#   1. the GPU KV-cache and varlen tests (C++), whose cases include head dims 40, 59 and 100
#      (padded copies: src/cuda/kvcache_staging.cu);
#   2. the Python KV-cache, varlen (paged block_table on CUDA: src/cuda/paged_kv.cu) and error tests;
#   3. flash_attn 2.x's own tests/test_flash_attn.py through scripts/fa_compat, a 0.002 sample
#      (seed 0, the dcd0131 run's), expected to fail only flash_attn's private entry points (2).
#      FA_FRACTION / FA_SEED / FA_BUDGET (s; past it the rest skip, saying so) change the sample.
# Usage, from the tree's root on a GPU machine, with ../.carry beside it (CUTLASS, googletest):
#   BUILD=build/sm90-sm90a FA_TEST=../.fa_test/test_flash_attn.py bash scripts/compat_device.sh
# BUILD names an existing CUDA build (library and GPU tests built); without it this builds the
# sm80 family at head dims 64 and 128, fp16 and bf16, for sm_90 (~2-3 min on 16 cores: the
# decode and varlen paths are sm80's; flash_attn's cases at other head dims then fail as "not in
# this trimmed build"). FA_TEST defaults to /work/main/.fa_test's copy as carried (.fa_test/).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-build/device-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
build="${BUILD:-}"
if [ -z "$build" ]; then
  build=build/compat
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA=ON -DFLASHCORE_CUDA_ARCHS=90-real \
    -DFLASHCORE_KERNEL_FAMILIES=sm80 -DFLASHCORE_HEAD_DIMS="64;128" -DFLASHCORE_BUILD_EXAMPLES=OFF \
    -DCUTLASS_DIR="$PWD/../.carry/cutlass_include" -DFLASHCORE_GTEST_SOURCE_DIR="$PWD/../.carry/googletest" \
    >"$out/configure.log" 2>&1 || { tail -20 "$out/configure.log"; exit 1; }
  ninja -C "$build" -j16 flashcore_c flashcore_gpu_tests >"$out/build.log" 2>&1 || {
    grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
fi
export FLASHCORE_LIBRARY="$PWD/$build/src/c_api/libflashcore_c.so"
status=0
echo "=== GPU tests: KV cache and varlen"
timeout 240 "$build/tests/gpu/flashcore_gpu_tests" --gtest_filter='*KvCache*:*Varlen*' >"$out/gpu_kvcache_varlen.log" 2>&1 || status=1
grep -E "^\[  FAILED  \].*\(|tests ran|PASSED" "$out/gpu_kvcache_varlen.log" | head -30
echo "=== Python: KV cache, varlen (paged), errors"
PYTHONPATH=python timeout 300 python3 -m pytest -q python/tests/test_kvcache.py python/tests/test_varlen.py \
  python/tests/test_errors.py 2>&1 | tail -15 || status=1
fraction="${FA_FRACTION:-0.002}"
seed="${FA_SEED:-0}"
budget=()
[ -n "${FA_BUDGET:-}" ] && budget=(--budget "$FA_BUDGET")
echo "=== flash_attn's tests: $fraction sample, seed $seed"
timeout 420 python3 scripts/fa_compat/run_sample.py "${FA_TEST:-.fa_test/test_flash_attn.py}" --fraction "$fraction" \
  --seed "$seed" "${budget[@]}" --out "$out" 2>&1 | tail -30
exit $status
