#!/bin/bash
# Device call 3: v4 (tiles chosen from the v3 variants) full check, bench with GQA rows and
# latency, compute-sanitizer.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout 60 python3 check.py --quick > $OUT/check_quick.txt 2>&1; rc=$?; tail -1 $OUT/check_quick.txt
if [ $rc = 124 ]; then echo "HANG in quick check"; exit 1; fi
timeout 120 python3 check.py > $OUT/check_full.txt 2>&1; echo "full check rc=$?"; grep FAIL $OUT/check_full.txt | head -8; grep "cases" $OUT/check_full.txt
BENCH_NAME=bench_v4.json timeout 300 python3 bench.py > $OUT/bench_v4.txt 2>&1; echo "bench rc=$?"; cat $OUT/bench_v4.txt
S=san/compute-sanitizer; [ -x /usr/local/cuda/bin/compute-sanitizer ] && S=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck synccheck; do
  timeout 80 $S --tool $tool --kernel-name kns=fwd_kernel --error-exitcode 7 python3 san.py > $OUT/san_$tool.txt 2>&1; echo "sanitizer $tool rc=$?"; tail -2 $OUT/san_$tool.txt
done
cd $OUT && tar czf results.tgz *.txt *.json && rm -f *.txt *.json
