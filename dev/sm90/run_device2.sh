#!/bin/bash
# Device call 2: v3 full check + bench; A/B variants (libfc_sm90_exp.so); compute-sanitizer.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout 60 python3 check.py --quick > $OUT/check_quick.txt 2>&1; rc=$?; tail -2 $OUT/check_quick.txt
if [ $rc = 124 ]; then echo "HANG in quick check"; exit 1; fi
timeout 120 python3 check.py > $OUT/check_full.txt 2>&1; echo "full check rc=$?"; grep FAIL $OUT/check_full.txt | head -8; grep "cases" $OUT/check_full.txt
BENCH_NAME=bench_v3.json timeout 200 python3 bench.py > $OUT/bench_v3.txt 2>&1; echo "bench rc=$?"; cat $OUT/bench_v3.txt
for spec in "0:128" "1:256" "2:128" "3:64" "4:128" "5:64"; do v=${spec%%:*}; d=${spec#*:}
  echo "== variant $v (d$d)"
  FC_LIB=libfc_sm90_exp.so VARIANT=$v CHECK_DIMS=$d CHECK_NAME=check_var$v.json timeout 60 python3 check.py --quick 2>&1 | grep "cases\|FAIL" | head -4
  FC_LIB=libfc_sm90_exp.so VARIANT=$v DIMS=$d DTYPES=bf16 BENCH_NAME=bench_var$v.json timeout 100 python3 bench.py 2>&1 | grep -v latency
done > $OUT/variants.txt 2>&1; cat $OUT/variants.txt
S=san/compute-sanitizer; [ -x /usr/local/cuda/bin/compute-sanitizer ] && S=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck synccheck; do
  timeout 80 $S --tool $tool --kernel-name kns=fwd_kernel --error-exitcode 7 python3 san.py > $OUT/san_$tool.txt 2>&1; echo "sanitizer $tool rc=$?"; tail -4 $OUT/san_$tool.txt
done
cd $OUT && tar czf results.tgz *.txt *.json && rm -f *.txt *.json
