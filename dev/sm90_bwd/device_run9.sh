#!/bin/bash
# Device run 9 of the sm90 backward (session 9, branch s9-bwd2), dev harness only, one call of
# ~50 s: the library's d256 path after run 8 (run_bwd_swapkv: dq_accum zeroed by the preprocess,
# GQA groups split over a cluster by bwd_swapkv_kv_splits, deterministic mode by rounds of the
# single-block kernel, with the split where a round leaves SMs idle) checked in bf16 and fp16 and
# timed against variant 9 (the d256 path before run 8) and variant 8 (run 8's rounds, no split).
# Build on the host first:
#   OBJ=/tmp/sm90bwd-<you> TUS="bwd_sm90_bf16_hdim256 bwd_sm90_fp16_hdim256" VARIANTS=1 \
#     bash dev/sm90_bwd/build.sh <devcarry>/dev/sm90_bwd
# then `bash <devcarry>/dev/sm90_bwd/device_run9.sh` in one call:
#   1. compute-sanitizer memcheck / racecheck / synccheck on san.py's d256 shapes (the library's
#      path), in the background beside step 2;
#   2. check.py, d256 bf16 + fp16, the full list with CHECK_SPLITS=2,4 (default and deterministic
#      mode forced), workspace NaN-poisoned, deterministic x3 bit-identical;
#   3. bench.py (10 timed calls a cell): MHA, and GQA 8:1 with variants 8 and 9 beside.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
S="$out/summary.txt"
say() { echo "$*" | tee -a "$S"; }
say "=== $(date +%T) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader)"

for tool in memcheck racecheck synccheck; do
  SAN_DIMS=256 timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 python3 san.py >"$out/san_$tool.log" 2>&1 &
done
POISON_WS=1 CHECK_DIMS=256 CHECK_FP16=1 CHECK_SPLITS=2,4 DET_REPEATS=3 OUT=$out timeout 60 python3 check.py \
  >"$out/checks.txt" 2>&1
say "check d256 bf16+fp16 (library path, forced splits 2,4): rc=$? $(tail -1 "$out/checks.txt")"
grep -E '^FAIL|Error' "$out/checks.txt" | head -6 | cut -c1-400 | tee -a "$S"
wait
for tool in memcheck racecheck synccheck; do
  say "sanitizer $tool: done=$(tail -c 3000 "$out/san_$tool.log" | grep -c 'san.py done') \
$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san_$tool.log" | tr '\n' ' ')"
done
cat "$out"/san_*.log | grep -E 'Invalid|Error|Hazard|Race' | grep -v SUMMARY | head -10 | cut -c1-300 | tee -a "$S"
tar czf "$out/san_logs.tgz" -C "$out" san_memcheck.log san_racecheck.log san_synccheck.log && rm -f "$out"/san_*.log

export OUT=$out BENCH_ITERS=10 BENCH_D=256
DET_VARIANTS=9 timeout 40 python3 bench.py 2>&1 | tee -a "$S"
BENCH_GQA=8 VARIANTS=9 DET_VARIANTS=8,9 timeout 50 python3 bench.py 2>&1 | tee -a "$S"
say "=== done $(date +%T)"
