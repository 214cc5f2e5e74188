#!/bin/bash
# Device run 2 of the sm90 backward (issue 15), one call within ~250 device seconds: the library
# with the sm90 backward registered (preset sm90-sm90a trimmed to head dims 64/96/128/256, the
# sm80 d256 kernels serving the d192/d256 backward fallback; only the targets the steps need), then
#   1. the backward and kernel-family GPU tests with FLASHCORE_KERNELS=sm90 (deterministic mode 10
#      runs per head dim), the kernel-family and dispatch tests under auto;
#   2. compute-sanitizer memcheck / racecheck / synccheck on CudaBackwardSanitize, sm90;
#   3. bench/bench.py --hopper, backward and fwd_bwd, flashcore vs cuDNN;
#   4. the dev harness (built on the host, carried): variants 3 (d128, kDqFirst off) and 4 (d64,
#      kBlockM = 128) checked and timed against the default;
#   5. bench_lib.py: default vs deterministic vs cuDNN through flash_attn_func;
#   6. the CLI fuzzer, 300 problems, --kernels sm90.
# Each step under its own timeout; summary.txt and logs.tgz (re-packed after each step) come back.
cd "$(dirname "$0")/../.."
root=$PWD
out=${OUT:-/tmp/out}
logs=/tmp/logs
mkdir -p "$out" "$logs"
S="$out/summary.txt"
pack() { tar czf "$out/logs.tgz" -C "$logs" . 2>/dev/null; }
say() { echo "$*" | tee -a "$S"; }
export PYTHONUNBUFFERED=1
say "=== $(date +%T) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader)"

# ---- build
t0=$(date +%s)
cmake --preset sm90-sm90a -DCUTLASS_DIR=$root/.carry/cutlass_include \
  -DFLASHCORE_GTEST_SOURCE_DIR=$root/.carry/googletest -DFLASHCORE_BUILD_EXAMPLES=OFF \
  "-DFLASHCORE_HEAD_DIMS=64;96;128;256" >"$logs/configure.log" 2>&1 ||
  { say "configure failed"; tail -20 "$logs/configure.log" | tee -a "$S"; pack; exit 1; }
if ! cmake --build build/sm90-sm90a -j16 --target flashcore_gpu_tests flashcore_c flashcore_cli >"$logs/build.log" 2>&1; then
  say "build failed"; grep -E "error|FAILED" "$logs/build.log" | head -30 | tee -a "$S"; pack; exit 1
fi
say "build: $(( $(date +%s) - t0 )) s; sm90 bwd ptxas spill lines: $(grep 'spill' "$logs/build.log" | grep -c 'sm9010bwd_kernel')"
pack
gpu_tests=build/sm90-sm90a/tests/gpu/flashcore_gpu_tests
cli=build/sm90-sm90a/tools/flashcore
export FLASHCORE_LIBRARY=$root/build/sm90-sm90a/src/c_api/libflashcore_c.so

# ---- 1. GPU suite per family
run_tests() {  # name timeout env filter
  local name=$1 t=$2 fam=$3 filter=$4 s0=$(date +%s)
  FLASHCORE_KERNELS=$fam timeout "$t" "$gpu_tests" --gtest_filter="$filter" >"$logs/gpu_$name.log" 2>&1
  local rc=$?
  say "gpu tests $name (FLASHCORE_KERNELS=$fam, $filter): rc=$rc, $(( $(date +%s) - s0 )) s; \
$(grep -E '^\[  PASSED  \]|^\[  FAILED  \]|^\[  SKIPPED \] [0-9]' "$logs/gpu_$name.log" | tr '\n' ' ')\
$(grep -c '^note: skipped' "$logs/gpu_$name.log") shapes skipped (no kernel)"
  grep -E '^\[  FAILED  \] [A-Z]' "$logs/gpu_$name.log" | head -20 | tee -a "$S"
  pack
}
run_tests sm90 120 sm90 '*CudaBackward*:*KernelFamily*'
run_tests auto 40 auto '*KernelFamily*:*CudaScoreOptionsDispatch*'

# ---- 2. sanitizers on the sm90 backward
for tool in racecheck memcheck synccheck; do
  s0=$(date +%s)
  FLASHCORE_KERNELS=sm90 timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 "$gpu_tests" \
    --gtest_filter='*CudaBackwardSanitize*' >"$logs/san_$tool.log" 2>&1
  say "compute-sanitizer $tool (sm90, CudaBackwardSanitize): rc=$?, $(( $(date +%s) - s0 )) s; \
$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  PASSED|^\[  FAILED' "$logs/san_$tool.log" | tr '\n' ' ')"
  pack
done

# ---- 3. the project benchmark, backward and fwd_bwd vs cuDNN
s0=$(date +%s)
timeout 120 bash scripts/bench.sh --hopper --impls flashcore,sdpa_cudnn --passes bwd,fwd_bwd --no-latency \
  --no-memory --plots none --budget-s 100 --run-name "h100_sm90bwd_${COMMIT:-dev}" --cli "$cli" \
  --out-dir "$logs/bench" --flat >"$logs/bench.log" 2>&1
say "bench: rc=$?, $(( $(date +%s) - s0 )) s"
grep -E "cuDNN geometric|ran .* cells" "$logs/bench/"*.md 2>/dev/null | head -20 | tee -a "$S"
cp "$logs/bench/"*.md "$logs/bench/"*.json "$out/" 2>/dev/null
pack
# ---- 4. harness (dev/sm90_bwd/build.sh on the host with TUS="bwd_sm90_bf16_hdim128 bwd_sm90_bf16_hdim64"
#      VARIANTS=1, libfc_sm90_bwd.so copied into dev/sm90_bwd/ of the carried tree): each variant
#      checked (variant 4 is a new tile: the full case list) and timed against the default.
#      Variant 3: d128 with kDqFirst off (the order before run 2); variant 4: d64 with kBlockM = 128.
(
  cd dev/sm90_bwd
  for spec in "128 3 --quick" "64 4"; do
    set -- $spec
    CHECK_DIMS=$1 VARIANT=$2 OUT=$logs CHECK_NAME=variant$2_checks.jsonl timeout 60 python3 check.py $3 \
      >"$logs/variant$2_check.log" 2>&1
    echo "variant $2 check: rc=$? ok=$(grep -c '^OK' "$logs/variant$2_check.log") \
$(grep -E '^FAIL|cases' "$logs/variant$2_check.log" | head -5 | tr '\n' ' ')"
    BENCH_D=$1 VARIANTS=$2 timeout 40 python3 bench.py >"$logs/variant$2_bench.txt" 2>&1
    echo "variant $2 bench: rc=$?"; cat "$logs/variant$2_bench.txt"
  done
) 2>&1 | tee -a "$S"
pack

# ---- 5. deterministic cost through the library
PYTHONPATH=$root/python timeout 40 python3 dev/sm90_bwd/bench_lib.py >"$logs/bench_lib.txt" 2>&1
say "bench_lib: rc=$?"; cat "$logs/bench_lib.txt" >>"$S"
pack

# ---- 6. fuzz
s0=$(date +%s)
timeout 40 "$cli" fuzz --device cuda --kernels sm90 --count 300 --seed 21 >"$logs/fuzz_sm90.log" 2>&1
say "fuzz sm90: rc=$?, $(( $(date +%s) - s0 )) s; $(tail -3 "$logs/fuzz_sm90.log" | tr '\n' ' ')"
pack

say "=== done $(date +%T)"
