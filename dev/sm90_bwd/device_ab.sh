#!/bin/bash
# Device runs 5 and 6 of the sm90 backward (issue 15, session 9), one call of ~75 s, harness only
# (libfc_sm90_bwd.so = this branch, libfc_base.so = main at 51b0e9b; both bf16 d64 + d128, built on
# the host by build.sh and carried; no library build on the device):
#   1. check.py against the float64 reference: the full list at d64 + d128, deterministic cases
#      x10 bit-identical, and the GQA cases with the kv split forced to 1, 2 and 4 (default and
#      deterministic mode);
#   2. compute-sanitizer memcheck / racecheck / synccheck on san.py (deterministic + split shapes),
#      beside step 1;
#   3. bench_ab.py: split rule (S = 1/2/4/rule), deterministic mode, per-kernel profile; then the
#      base library's rows for the before/after ($BASE_SECTIONS).
# Run 5: `bash device_ab.sh`; run 6: `CHECK_SPLITS=2,4 BASE_SECTIONS=det,prof bash device_ab.sh`.
# Run from the carried folder that holds the .so files and the scripts.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
S="$out/summary.txt"
say() { echo "$*" | tee -a "$S"; }
say "=== $(date +%T) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader)"

CHECK_DIMS=128 timeout 40 python3 check.py --quick >"$out/check.log" 2>&1
rc=$?
say "quick check: rc=$rc $(tail -1 "$out/check.log")"
[ $rc = 124 ] && { say "HANG in the quick check"; exit 1; }

# The sanitizers run beside the full check (both correctness only; nothing is timed until both end).
for tool in memcheck racecheck synccheck; do
  SAN_DIMS=64,128 timeout 90 compute-sanitizer --tool $tool --error-exitcode 3 python3 san.py >"$out/san_$tool.log" 2>&1 &
done
CHECK_DIMS=64,128 DET_REPEATS=10 CHECK_SPLITS=${CHECK_SPLITS:-1,2,4} OUT=$out timeout 120 python3 check.py >>"$out/check.log" 2>&1
say "full check (bf16 d64+d128, det x10, forced splits ${CHECK_SPLITS:-1,2,4}): rc=$? $(tail -1 "$out/check.log")"
grep -E '^FAIL|Error' "$out/check.log" | head -10 | cut -c1-400 | tee -a "$S"
wait
for tool in memcheck racecheck synccheck; do
  say "sanitizer $tool: done=$(tail -c 3000 "$out/san_$tool.log" | grep -c 'san.py done') \
$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san_$tool.log" | tr '\n' ' ')"
done
cat "$out"/san_*.log | grep -E 'Invalid|Error|Hazard|Race' | head -10 | cut -c1-300 | tee -a "$S"
tar czf "$out/san_logs.tgz" -C "$out" san_memcheck.log san_racecheck.log san_synccheck.log && rm -f "$out"/san_*.log

FC_LIB=libfc_sm90_bwd.so OUT=$out timeout 120 python3 bench_ab.py >"$out/bench_new.log" 2>&1
say "bench (this branch): rc=$? rows=$(grep -c '^{' "$out/bench_new.log")"
FC_LIB=libfc_base.so AB_SECTIONS=${BASE_SECTIONS:-splits,det} OUT=$out timeout 60 python3 bench_ab.py >"$out/bench_base.log" 2>&1
say "bench (base 51b0e9b): rc=$? rows=$(grep -c '^{' "$out/bench_base.log")"
grep -vE '^\{' "$out/bench_new.log" "$out/bench_base.log" | head -10 | tee -a "$S"
say "=== done $(date +%T)"
