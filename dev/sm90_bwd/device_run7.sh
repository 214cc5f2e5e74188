#!/bin/bash
# Device run 7 of the sm90 backward (issue 15, session 9, branch s9-bwd; taken before s9-bwdtune's runs 5-6, numbered after them): the first d256 kernel (transposed
# arrangement, bwd_swapkv_*.h), one call:
#   0. the library (preset sm90-sm90a, head dim 256 only, flashcore_c + flashcore_gpu_tests) builds
#      in the background;
#   A. the dev harness (carried libfc_sm90_bwd.so: bf16 + fp16 d256, built on the host): quick
#      check (hang guard), then check.py's full list at d256 bf16 + fp16 and d192 bf16 (on the d256
#      kernel, padded); on any failure the build is stopped and the call ends (device time);
#   B. compute-sanitizer memcheck / racecheck / synccheck on san.py's d256 shapes, harness timing;
#   C. the library's backward GPU tests with FLASHCORE_KERNELS=sm90 (every head dim on the d256
#      kernel in this build) and the benchmark: bwd + fwd_bwd, d256 bf16 + fp16, 2k-16k, flashcore
#      (auto = sm90 now), flashcore_sm80, flashcore_det, cuDNN; d192 bf16 bwd at 4k / 16k.
cd "$(dirname "$0")/../.."
root=$PWD
out=${OUT:-/tmp/out}
logs=/tmp/logs
mkdir -p "$out" "$logs"
S="$out/summary.txt"
pack() { tar czf "$out/logs.tgz" -C "$logs" . 2>/dev/null; }
say() { echo "$*" | tee -a "$S"; }
export PYTHONUNBUFFERED=1
[ -e .carry ] || ln -s ../.carry .carry
say "=== $(date +%T) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader)"

t0=$(date +%s)
(
  cmake --preset sm90-sm90a -DCUTLASS_DIR=$root/.carry/cutlass_include \
    -DFLASHCORE_GTEST_SOURCE_DIR=$root/.carry/googletest -DFLASHCORE_BUILD_EXAMPLES=OFF \
    "-DFLASHCORE_HEAD_DIMS=256" >"$logs/configure.log" 2>&1 &&
  nice -n 5 cmake --build build/sm90-sm90a -j15 --target flashcore_c flashcore_gpu_tests >"$logs/build.log" 2>&1
  echo $? >"$logs/build.rc"
) &
build_pid=$!

# ---- A. harness correctness
cd dev/sm90_bwd
fails=0
run_check() {  # NAME TIMEOUT ENV...
  local name=$1 t=$2; shift 2
  env "$@" OUT=$logs CHECK_NAME=checks.jsonl DET_REPEATS=3 timeout $t python3 check.py $ARGS >"$logs/check_$name.log" 2>&1
  local rc=$?
  say "check $name: rc=$rc ok=$(grep -c '^OK' "$logs/check_$name.log") $(grep -E '^FAIL|cases|Error' "$logs/check_$name.log" | head -6 | cut -c1-400 | tr '\n' ' ')"
  [ $rc = 0 ] || fails=$((fails + 1))
}
ARGS=--quick run_check quick 60 CHECK_DIMS=256
if [ $fails = 0 ]; then
  ARGS= run_check d256_bf16_fp16 150 CHECK_DIMS=256 CHECK_FP16=1
  ARGS= run_check d192_bf16 60 CHECK_DIMS=192
fi
pack
if [ $fails != 0 ]; then
  kill -- -$build_pid 2>/dev/null; pkill -P $build_pid 2>/dev/null
  say "=== stopped after check failures $(date +%T)"; pack; exit 1
fi

# ---- B. sanitizers + harness timing
for tool in memcheck racecheck synccheck; do
  SAN_DIMS=256 timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 python3 san.py >"$logs/san_$tool.log" 2>&1 &
done
wait $(jobs -p | grep -v "^$build_pid$") 2>/dev/null
for tool in memcheck racecheck synccheck; do
  say "sanitizer $tool: done=$(tail -c 2000 "$logs/san_$tool.log" | grep -cE 'san.py done') \
$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/san_$tool.log" | tr '\n' ' ')"
done
BENCH_D=256 timeout 60 python3 bench.py >"$logs/harness_bench.txt" 2>&1
BENCH_D=256 BENCH_FP16=1 timeout 60 python3 bench.py >>"$logs/harness_bench.txt" 2>&1
cat "$logs/harness_bench.txt" | tee -a "$S"
cd "$root"
pack
wait $build_pid
say "build: rc=$(cat "$logs/build.rc" 2>/dev/null), $(( $(date +%s) - t0 )) s"
grep -E "error|FAILED" "$logs/build.log" | head -20 | tee -a "$S"
pack

# ---- C. library tests + benchmark
FLASHCORE_KERNELS=sm90 timeout 120 build/sm90-sm90a/tests/gpu/flashcore_gpu_tests \
  --gtest_filter='*CudaBackward*:*KernelFamily*' >"$logs/gpu_tests.log" 2>&1
say "gpu tests (sm90, *CudaBackward*:*KernelFamily*): rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$logs/gpu_tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure' "$logs/gpu_tests.log" | head -20 | tee -a "$S"
pack
export FLASHCORE_LIBRARY=$root/build/sm90-sm90a/src/c_api/libflashcore_c.so
s0=$(date +%s)
timeout 200 bash scripts/bench.sh --hopper --impls flashcore,flashcore_sm80,flashcore_det,sdpa_cudnn --passes bwd,fwd_bwd \
  --head-dims 256 --seqlens 2048,4096,8192,16384 --no-latency --no-memory --plots none --budget-s 180 --rep-ms 25 \
  --run-name "h100_sm90bwd_d256_${COMMIT:-dev}" --out-dir "$logs/bench" --flat >"$logs/bench.log" 2>&1
say "bench d256: rc=$?, $(( $(date +%s) - s0 )) s"
grep -A30 "^summary over all" "$logs/bench.log" | head -30 | tee -a "$S"
cp "$logs/bench/"*.md "$logs/bench/"*.json "$out/" 2>/dev/null
pack
timeout 60 bash scripts/bench.sh --hopper --impls flashcore,flashcore_sm80,sdpa_cudnn --passes bwd --dtypes bf16 \
  --head-dims 192 --seqlens 4096,16384 --gqa-ratios 1 --no-latency --no-memory --plots none --budget-s 50 --rep-ms 25 \
  --run-name "h100_sm90bwd_d192_${COMMIT:-dev}" --out-dir "$logs/bench192" --flat >"$logs/bench192.log" 2>&1
say "bench d192: rc=$?"
cp "$logs/bench192/"*.json "$out/" 2>/dev/null
pack
say "=== done $(date +%T)"
