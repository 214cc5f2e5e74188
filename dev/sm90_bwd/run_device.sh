#!/bin/bash
# One device call: quick check (hang guard), the full check at d128 bf16, the other built
# kernels, variant 1 (the first version), a first timing, compute-sanitizer. Each step under its own timeout; what
# finished before the call's limit comes back (4 files: checks.txt, checks.jsonl, bench.txt, san.txt).
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
C=$OUT/checks.txt
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader | tee $C
step() {  # step NAME TIMEOUT ENV... -- ARGS: one check run appended to checks.txt, its summary printed
  local name=$1 t=$2; shift 2
  echo "== $name" >> $C
  env "$@" timeout $t python3 check.py ${ARGS} >> $C.part 2>&1; local rc=$?
  cat $C.part >> $C
  echo "== $name rc=$rc ok=$(grep -c '^OK' $C.part)"; grep "^FAIL\|cases\|Error\|error" $C.part | cut -c1-700 | head -12
  rm -f $C.part
  return $rc
}
ARGS=--quick step quick 40 CHECK_DIMS=128; [ $? = 124 ] && { echo "HANG in quick check"; exit 1; }
ARGS= step d128_bf16 70 CHECK_DIMS=128
ARGS= step d64_96_bf16 50 CHECK_DIMS=64,96
ARGS= step d128_fp16 35 CHECK_DIMS=128 CHECK_FP16_ONLY=1
ARGS=--quick step variant1 25 CHECK_DIMS=128 VARIANT=1
VARIANTS=1 timeout 50 python3 bench.py > $OUT/bench.txt 2>&1; echo "bench rc=$?"; cat $OUT/bench.txt | tail -4
S=/usr/local/cuda/bin/compute-sanitizer; [ -x $S ] || S=san/compute-sanitizer
timeout 45 $S --tool memcheck --error-exitcode 7 python3 san.py > $OUT/san.txt 2>&1; echo "memcheck rc=$?"; tail -3 $OUT/san.txt
for tool in racecheck synccheck; do
  echo "== $tool" >> $OUT/san.txt
  timeout 35 $S --tool $tool --kernel-name kns=bwd_kernel --error-exitcode 7 python3 san.py >> $OUT/san.txt 2>&1; echo "$tool rc=$?"; tail -3 $OUT/san.txt
done
