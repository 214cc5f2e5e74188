#!/bin/bash
# Device call 4: causal zig-zag persistent scheduler A/B (bf16 d64/128/256) against the main
# causal path in the same run; small-shape latency eager / queued / CUDA graph.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
for spec in "6:64" "7:128" "8:256"; do v=${spec%%:*}; d=${spec#*:}
  echo "== zig-zag variant $v (d$d)"
  FC_LIB=libfc_sm90_exp.so VARIANT=$v CHECK_DIMS=$d CHECK_DTYPES=bf16 CHECK_NAME=check_var$v.json timeout 60 python3 check.py 2>&1 | grep "cases\|FAIL" | head -4
done
echo "== main causal"; DIMS=64,128,256 DTYPES=bf16 CAUSAL=1 GQA=0 LATENCY=0 BENCH_NAME=bench_main_causal.json timeout 150 python3 bench.py 2>&1
for spec in "6:64" "7:128" "8:256"; do v=${spec%%:*}; d=${spec#*:}
  echo "== zig-zag variant $v (d$d)"
  FC_LIB=libfc_sm90_exp.so VARIANT=$v DIMS=$d DTYPES=bf16 CAUSAL=1 GQA=0 LATENCY=0 BENCH_NAME=bench_var$v.json timeout 80 python3 bench.py 2>&1
done
echo "== main causal again"; DIMS=64,128,256 DTYPES=bf16 CAUSAL=1 GQA=0 BENCH_NAME=bench_main_causal2.json timeout 200 python3 bench.py 2>&1
cd $OUT && tar czf results.tgz *.json && rm -f *.json
