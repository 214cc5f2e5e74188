#!/bin/bash
# Device run 4 of the sm90 backward (issue 15, session 8), one call of ~7 minutes:
#   A. (while the library builds) the dev harness (carried libfc_sm90_bwd.so, bf16 d64 + d128, built
#      on the host): check.py against the float64 reference (GQA cases split over clusters now),
#      and compute-sanitizer memcheck / racecheck / synccheck on san.py's shapes;
#   B. the library's GPU backward tests with FLASHCORE_KERNELS=sm90 (incl. CudaBackwardGqaSplit);
#   C. the project benchmark (bench.sh --hopper: flashcore, flashcore_det, sdpa_cudnn; bwd and
#      fwd_bwd; bf16 + fp16, d64/128/256, 512..16k, causal and not, GQA 4:1 / 8:1 causal at 4k/8k).
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
    "-DFLASHCORE_HEAD_DIMS=64;128;256" >"$logs/configure.log" 2>&1 &&
  nice -n 5 cmake --build build/sm90-sm90a -j15 --target flashcore_c flashcore_gpu_tests >"$logs/build.log" 2>&1
  echo $? >"$logs/build.rc"
) &
build_pid=$!

# ---- A. harness (its kernels are this tree's, built on the host)
(
  cd dev/sm90_bwd
  CHECK_DIMS=64,128 CHECK_FP16= DET_REPEATS=3 OUT=$logs CHECK_NAME=checks.jsonl timeout 100 python3 check.py >"$logs/check.log" 2>&1
  echo "harness check (bf16 d64+d128, full list): rc=$? ok=$(grep -c '^OK' "$logs/check.log") \
$(grep -E '^FAIL|cases|worst' "$logs/check.log" | head -8 | cut -c1-300 | tr '\n' ' ')"
  for tool in memcheck racecheck synccheck; do
    SAN_DIMS=64,128 timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 python3 san.py >"$logs/san_$tool.log" 2>&1 &
  done
  wait
  for tool in memcheck racecheck synccheck; do
    echo "sanitizer $tool: done=$(tail -c 2000 "$logs/san_$tool.log" | grep -cE 'san.py done') \
$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/san_$tool.log" | tr '\n' ' ')"
  done
) 2>&1 | tee -a "$S"
pack
wait $build_pid
say "build: rc=$(cat "$logs/build.rc" 2>/dev/null), $(( $(date +%s) - t0 )) s"
grep -E "error|FAILED" "$logs/build.log" | head -20 | tee -a "$S"
pack

# ---- B. the library's backward GPU tests on the sm90 family
FLASHCORE_KERNELS=sm90 timeout 150 build/sm90-sm90a/tests/gpu/flashcore_gpu_tests \
  --gtest_filter='*CudaBackward*:*KernelFamily*' >"$logs/gpu_tests.log" 2>&1
say "gpu tests (sm90, *CudaBackward*:*KernelFamily*): rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$logs/gpu_tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|changed in run' "$logs/gpu_tests.log" | head -20 | tee -a "$S"
pack

# ---- C. the benchmark through the library
export FLASHCORE_LIBRARY=$root/build/sm90-sm90a/src/c_api/libflashcore_c.so
s0=$(date +%s)
timeout 250 bash scripts/bench.sh --hopper --impls flashcore,flashcore_det,sdpa_cudnn --passes bwd,fwd_bwd \
  --no-latency --no-memory --plots none --budget-s 230 --rep-ms 30 --run-name "h100_sm90bwd_${COMMIT:-dev}" \
  --out-dir "$logs/bench" --flat >"$logs/bench.log" 2>&1
say "bench: rc=$?, $(( $(date +%s) - s0 )) s"
grep -A40 "^summary over all" "$logs/bench.log" | head -40 | tee -a "$S"
cp "$logs/bench/"*.md "$logs/bench/"*.json "$out/" 2>/dev/null
pack
say "=== done $(date +%T)"
