#!/bin/bash
# Device call 6: v6 (two Q buffers, bottom-aligned causal grid, d64 zig-zag, d128 short-keys
# tile, d256 ping-pong, small-problem tile, TMA descriptor cache) against the v5 build
# (libfc_sm90_base.so) and variant 9 (d64 causal one tile per CTA) in one process; full check;
# compute-sanitizer on small shapes.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
export CHECK_DIMS=64,72,96,128,256 SAN_SKIP_DIMS=192  # this build has no d192 TUs
OUT= timeout 60 python3 check.py --quick > /tmp/check_quick.txt 2>&1; rc=$?; tail -1 /tmp/check_quick.txt
if [ $rc != 0 ]; then grep FAIL /tmp/check_quick.txt | head -5; tail -3 /tmp/check_quick.txt; echo "quick check rc=$rc: stop"; exit 1; fi
EXTRA="onetile=libfc_sm90_var.so@9@64:1" FC_LIB_A=libfc_sm90_base.so FC_LIB_B=libfc_sm90.so BENCH_NAME=abbench_v6.json \
  timeout 220 python3 abbench.py > $OUT/abbench_v6.txt 2>&1; echo "abbench rc=$?"
timeout 180 python3 check.py > $OUT/check_full.txt 2>&1; echo "full check rc=$?"; grep FAIL $OUT/check_full.txt | head -5; grep "cases" $OUT/check_full.txt
OUT= FC_LIB=libfc_sm90_var.so VARIANT=9 CHECK_DIMS=64 CHECK_DTYPES=bf16 timeout 60 python3 check.py > $OUT/check_var9.txt 2>&1
echo "variant 9 check rc=$?"; grep "FAIL\|cases" $OUT/check_var9.txt | head -4
S=san/compute-sanitizer; [ -x /usr/local/cuda/bin/compute-sanitizer ] && S=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck synccheck; do
  timeout 90 $S --tool $tool --kernel-name kns=fwd_kernel --error-exitcode 7 python3 san.py > $OUT/san_$tool.txt 2>&1; echo "sanitizer $tool rc=$?"; tail -2 $OUT/san_$tool.txt
done
cat $OUT/abbench_v6.txt
