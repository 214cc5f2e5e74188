#!/bin/bash
# Device run 8 of the sm90 backward (prepared in session 9, branch s9-bwd, not run), dev harness: variant 7, the
# d256 kernel with GQA groups split over a cluster (bwd_swapkv_cluster_reduce.h), and variant 8,
# d256 deterministic mode as rounds of single-block launches, against the default d256 kernels. Build on the host first:
#   TUS="bwd_sm90_bf16_hdim256" VARIANTS=1 bash dev/sm90_bwd/build.sh <devcarry>/dev/sm90_bwd
# then in one call: check (GQA cases split), sanitizers, timing at GQA 8:1 and 4:1.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
S="$out/summary.txt"
say() { echo "$*" | tee -a "$S"; }
say "=== $(date +%T) $(nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader)"
VARIANT=7 CHECK_DIMS=256 DET_REPEATS=3 timeout 120 python3 check.py >"$out/check_v7.txt" 2>&1
say "check variant 7 (d256 bf16, full list): rc=$? ok=$(grep -c '^OK' "$out/check_v7.txt") $(grep -E '^FAIL|cases' "$out/check_v7.txt" | head -6 | cut -c1-300 | tr '\n' ' ')"
VARIANT=8 CHECK_DIMS=256 DET_REPEATS=3 timeout 120 python3 check.py >"$out/check_v8.txt" 2>&1
say "check variant 8 (deterministic cases by rounds): rc=$? ok=$(grep -c '^OK' "$out/check_v8.txt") $(grep -E '^FAIL|cases' "$out/check_v8.txt" | head -6 | cut -c1-300 | tr '\n' ' ')"
for tool in memcheck racecheck synccheck; do
  VARIANT=7 SAN_DIMS=256 timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 python3 san.py >"$out/san_$tool.txt" 2>&1 &
done
wait
for tool in memcheck racecheck synccheck; do
  say "sanitizer $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san_$tool.txt" | tr '\n' ' ')"
done
BENCH_D=256 DET_VARIANTS=8 timeout 90 python3 bench.py 2>&1 | tee -a "$S"
VARIANT=8 SAN_DIMS=256 timeout 120 compute-sanitizer --tool racecheck python3 san.py 2>&1 | grep -E 'RACECHECK SUMMARY' | tee -a "$S"
for gqa in 8 4; do
  BENCH_D=256 BENCH_GQA=$gqa VARIANTS=7 timeout 90 python3 bench.py 2>&1 | tee -a "$S"
done
say "=== done $(date +%T)"
