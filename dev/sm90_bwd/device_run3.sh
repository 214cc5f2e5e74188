#!/bin/bash
# Device run 3 of the sm90 backward (issue 15, session 7), one call of ~9 minutes:
#   A. (while the library builds on 15 cores) the dev harness, built on the host and carried in
#      dev/sm90_bwd/libfc_sm90_bwd.so (build.sh with TUS="bwd_sm90_bf16_hdim64 bwd_sm90_bf16_hdim128"
#      VARIANTS=1): variants 4 (d64 128 x 128), 5 (d128 overlapped schedule, 3 stages) and 6 (d64
#      overlapped) checked against the float64 reference (check.py, full case list, deterministic
#      bit-identity x5) and run under compute-sanitizer memcheck / racecheck / synccheck (san.py);
#   B. the harness timing of each variant against the default and cuDNN (bench.py, GPU otherwise idle);
#   C. the project benchmark through the library (bench.sh --hopper: flashcore, flashcore_det,
#      sdpa_cudnn; bwd and fwd_bwd; bf16 + fp16, d64/128/256, 512..16k, causal and not, GQA 4:1 / 8:1
#      causal at 4k/8k), then CUTLASS example 88's backward on a few fp16 cells.
# Each step under its own timeout; summary.txt, the bench JSON/md and logs.tgz come back.
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

# ---- build (background)
t0=$(date +%s)
(
  cmake --preset sm90-sm90a -DCUTLASS_DIR=$root/.carry/cutlass_include \
    -DFLASHCORE_GTEST_SOURCE_DIR=$root/.carry/googletest -DFLASHCORE_BUILD_EXAMPLES=OFF \
    "-DFLASHCORE_HEAD_DIMS=64;128;256" >"$logs/configure.log" 2>&1 &&
  nice -n 5 cmake --build build/sm90-sm90a -j15 --target flashcore_c >"$logs/build.log" 2>&1
  echo $? >"$logs/build.rc"
) &
build_pid=$!

# ---- A. harness checks and sanitizers
(
  cd dev/sm90_bwd
  for spec in "64 4" "128 5" "64 6"; do
    set -- $spec
    CHECK_DIMS=$1 VARIANT=$2 OUT=$logs CHECK_NAME=variant$2_checks.jsonl timeout 90 python3 check.py \
      >"$logs/variant$2_check.log" 2>&1
    echo "variant $2 (d$1) check: rc=$? ok=$(grep -c '^OK' "$logs/variant$2_check.log") \
$(grep -E '^FAIL|cases' "$logs/variant$2_check.log" | head -6 | cut -c1-400 | tr '\n' ' ')"
  done
  for tool in memcheck racecheck synccheck; do
    for spec in "64 4" "128 5" "64 6" "64,128 -1"; do
      set -- $spec
      SAN_DIMS=$1 VARIANT=$2 timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 python3 san.py \
        >"$logs/san_${tool}_v$2.log" 2>&1 &
    done
  done
  wait
  for tool in memcheck racecheck synccheck; do
    for v in 4 5 6 -1; do
      echo "sanitizer $tool variant $v: done=$(tail -c 2000 "$logs/san_${tool}_v$v.log" | grep -cE 'san.py done') \
$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/san_${tool}_v$v.log" | tr '\n' ' ')"
    done
  done
) 2>&1 | tee -a "$S"
pack
wait $build_pid
say "build: rc=$(cat "$logs/build.rc" 2>/dev/null), $(( $(date +%s) - t0 )) s (with the harness steps beside it)"
grep -E "error|FAILED" "$logs/build.log" | head -20 | tee -a "$S"
pack

# ---- B. harness timing
(
  cd dev/sm90_bwd
  for rep in 1 2; do  # twice: the spread between the two is the noise
    BENCH_D=64 VARIANTS=4,6 timeout 60 python3 bench.py
    BENCH_D=128 VARIANTS=5 timeout 60 python3 bench.py
  done
) 2>&1 | tee "$logs/variant_bench.txt" | tee -a "$S"
pack

# ---- C. the benchmark through the library
export FLASHCORE_LIBRARY=$root/build/sm90-sm90a/src/c_api/libflashcore_c.so
s0=$(date +%s)
timeout 270 bash scripts/bench.sh --hopper --impls flashcore,flashcore_det,sdpa_cudnn --passes bwd,fwd_bwd \
  --no-latency --no-memory --plots none --budget-s 240 --rep-ms 30 --run-name "h100_sm90bwd_${COMMIT:-dev}" \
  --out-dir "$logs/bench" --flat >"$logs/bench.log" 2>&1
say "bench: rc=$?, $(( $(date +%s) - s0 )) s"
grep -A40 "^summary over all" "$logs/bench.log" | head -40 | tee -a "$S"
cp "$logs/bench/"*.md "$logs/bench/"*.json "$out/" 2>/dev/null
pack
s0=$(date +%s)
timeout 60 bash scripts/bench.sh --hopper --impls cutlass_ex88 --dtypes fp16 --head-dims 64,128 --seqlens 2048,8192 \
  --passes bwd --gqa-ratios 0 --no-latency --no-memory --plots none --budget-s 45 \
  --run-name "h100_ex88bwd_${COMMIT:-dev}" --out-dir "$logs/ex88" --flat >"$logs/ex88.log" 2>&1
say "ex88: rc=$?, $(( $(date +%s) - s0 )) s"
cp "$logs/ex88/"*.json "$out/" 2>/dev/null
pack
say "=== done $(date +%T)"
