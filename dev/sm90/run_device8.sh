#!/bin/bash
# Device call 8: the v6 A/B bench (v5 build A, v6 build B) on the cells call 7 did not reach,
# without the variant (see abbench.py's note on extras), plus the small-shape latency.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
CELLS="bf16:64:1:16384;bf16:64:0:2048,4096,16384;bf16:128:0:1024,2048,4096,8192;bf16:128:1:2048,4096;bf16:256:0:1024,2048,4096,8192,16384;bf16:256:1:1024,2048,4096,8192;fp16:64:1:1024,2048,4096,8192;fp16:128:0:2048,4096;fp16:256:0:2048,4096,8192;fp16:256:1:2048,4096" \
  FC_LIB_A=libfc_sm90_base.so FC_LIB_B=libfc_sm90.so BENCH_NAME=abbench_v6b.json PYTHONUNBUFFERED=1 timeout 300 python3 abbench.py 2>&1 | tee $OUT/abbench_v6b.txt
