#!/bin/bash
# Device call 7: the v6 A/B bench again (call 6's stopped at d64 causal 16k: see abbench.py's
# note on extras past 8k keys).
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
EXTRA="onetile=libfc_sm90_var.so@9@64:1" FC_LIB_A=libfc_sm90_base.so FC_LIB_B=libfc_sm90.so BENCH_NAME=abbench_v6.json \
  timeout 300 python3 abbench.py 2>&1 | tee $OUT/abbench_v6.txt
