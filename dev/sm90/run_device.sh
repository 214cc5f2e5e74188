#!/bin/bash
# One device call: quick check (hang guard), full check, benchmark; optional A/B library.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
timeout 90 python3 check.py --quick > $OUT/check_quick.txt 2>&1; rc=$?
tail -15 $OUT/check_quick.txt
if [ $rc = 124 ]; then echo "HANG in quick check"; exit 1; fi
timeout 200 python3 check.py > $OUT/check_full.txt 2>&1; echo "full check rc=$?"; grep -c FAIL $OUT/check_full.txt; grep FAIL $OUT/check_full.txt | head -12; tail -14 $OUT/check_full.txt
BENCH_NAME=bench_main.json timeout 240 python3 bench.py > $OUT/bench_main.txt 2>&1; echo "bench rc=$?"; cat $OUT/bench_main.txt
if [ -f libfc_sm90_pp.so ]; then
  FC_LIB=libfc_sm90_pp.so CHECK_DIMS=64,128 CHECK_NAME=check_pp.json timeout 60 python3 check.py --quick > $OUT/check_pp.txt 2>&1; echo "pp check rc=$?"; tail -3 $OUT/check_pp.txt; grep FAIL $OUT/check_pp.txt | head -5
  FC_LIB=libfc_sm90_pp.so DIMS=64,128 BENCH_NAME=bench_pp.json timeout 150 python3 bench.py > $OUT/bench_pp.txt 2>&1; echo "pp bench rc=$?"; cat $OUT/bench_pp.txt
fi
