#!/bin/bash
# Device call 10 (the last of this session's allowance): libfc_sm90_skip.so = v6b (balanced
# zig-zag items + warpgroups skipping fully masked rounds; d64 and bf16 d256 objects, the rest
# from the v6 build) against v5: check, A/B with 2 rounds of 20-call timings, latency,
# compute-sanitizer.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
FC_LIB=libfc_sm90_skip.so CHECK_DIMS=64,72,96,128,256 CHECK_NAME=check_v6b.json timeout 120 python3 check.py > $OUT/check_v6b.txt 2>&1; rc=$?
grep "FAIL\|cases" $OUT/check_v6b.txt | head -4; [ $rc = 0 ] || { echo "check rc=$rc: stop"; exit 1; }
ROUNDS=2 ITERS=20 CELLS="bf16:64:1:1024,2048,4096,8192;fp16:64:1:2048,4096;bf16:256:1:1024,2048,4096;bf16:64:0:2048;bf16:128:0:2048,4096;fp16:128:0:2048,4096;bf16:256:0:2048,4096;fp16:256:0:2048,4096" \
  FC_LIB_A=libfc_sm90_base.so FC_LIB_B=libfc_sm90_skip.so BENCH_NAME=abbench_v6b.json timeout 240 python3 abbench.py 2>&1 | tee $OUT/abbench_v6b.txt
S=san/compute-sanitizer; [ -x /usr/local/cuda/bin/compute-sanitizer ] && S=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck synccheck; do
  FC_LIB=libfc_sm90_skip.so SAN_SKIP_DIMS=192 timeout 90 $S --tool $tool --kernel-name kns=fwd_kernel --error-exitcode 7 python3 san.py > $OUT/san_${tool}_v6b.txt 2>&1
  echo "sanitizer $tool rc=$?"; tail -1 $OUT/san_${tool}_v6b.txt
done
