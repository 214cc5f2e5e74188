#!/bin/bash
# (Kept for the record: variants 7 and 8 became the library's d256 path after this run, and
# variants.cu no longer has variant 7; device_run9.sh is the check of what followed.)
# Device run 8 of the sm90 backward (session 9, branch s9-bwd2), dev harness only, one call of
# ~100 s: variant 7 (d256 with GQA groups split over a cluster, bwd_swapkv_cluster_reduce.h) and
# variant 8 (d256 deterministic mode as rounds of single-block launches) against the default d256
# kernels, and the default's dq_accum zeroed by the preprocess instead of a memset (every check
# runs with the workspace filled with NaN first, POISON_WS). Build on the host first:
#   OBJ=/tmp/sm90bwd-<you> TUS="bwd_sm90_bf16_hdim256" VARIANTS=1 bash dev/sm90_bwd/build.sh <devcarry>/dev/sm90_bwd
# then `bash <devcarry>/dev/sm90_bwd/device_run8.sh` in one call:
#   1. compute-sanitizer memcheck / racecheck / synccheck on san.py's d256 shapes with variant 7,
#      memcheck / racecheck with variant 8, in the background beside step 2;
#   2. check.py (d256 bf16, the full list, deterministic x3 bit-identical): the default, variant 7
#      (its GQA/MQA cases split by the rule, plus CHECK_SPLITS=2,4 forced), variant 8;
#   3. bench.py: MHA with the rounds (DET_VARIANTS=8); GQA 8:1 and 4:1 with variant 7 (rule and S = 4
#      forced) and the rounds.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
S="$out/summary.txt"
say() { echo "$*" | tee -a "$S"; }
say "=== $(date +%T) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader)"

for run in "7 memcheck" "7 racecheck" "7 synccheck" "8 memcheck" "8 racecheck"; do
  set -- $run
  VARIANT=$1 SAN_DIMS=256 timeout 90 compute-sanitizer --tool $2 --error-exitcode 3 python3 san.py \
    >"$out/san_v$1_$2.log" 2>&1 &
done

export POISON_WS=1 CHECK_DIMS=256 DET_REPEATS=3 OUT=$out
for v in -1 7 8; do
  extra=""; [ $v = 7 ] && extra="CHECK_SPLITS=2,4"
  env VARIANT=$v $extra CHECK_NAME=checks_v$v.jsonl timeout 60 python3 check.py >"$out/check_v$v.log" 2>&1
  rc=$?
  say "check variant $v ($([ $v = -1 ] && echo default || echo dev) $extra): rc=$rc $(tail -1 "$out/check_v$v.log")"
  grep -E '^FAIL|Error' "$out/check_v$v.log" | head -6 | cut -c1-400 | tee -a "$S"
done
unset POISON_WS
wait
for f in "$out"/san_*.log; do
  say "$(basename "$f" .log): done=$(tail -c 3000 "$f" | grep -c 'san.py done') \
$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | tr '\n' ' ')"
done
cat "$out"/san_*.log | grep -E 'Invalid|Error|Hazard|Race' | grep -v SUMMARY | head -10 | cut -c1-300 | tee -a "$S"
tar czf "$out/san_logs.tgz" -C "$out" $(cd "$out" && ls san_*.log) && rm -f "$out"/san_*.log
cat "$out"/check_v*.log > "$out/checks.txt" && rm -f "$out"/check_v*.log
cat "$out"/checks_v*.jsonl > "$out/checks.jsonl" && rm -f "$out"/checks_v*.jsonl

BENCH_D=256 DET_VARIANTS=8 timeout 60 python3 bench.py 2>&1 | tee -a "$S"
for gqa in 8 4; do
  BENCH_D=256 BENCH_GQA=$gqa VARIANTS=7 BENCH_SPLITS=4 DET_VARIANTS=8 timeout 60 python3 bench.py 2>&1 | tee -a "$S"
done
say "=== done $(date +%T)"
