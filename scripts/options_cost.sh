#!/usr/bin/env bash
# What each attention option costs against the plain kernel, timed in one run on a GPU machine:
# forward and backward ms and TFLOP/s of `flashcore run` (FLOPs over the visible scores only, as
# tools/cli/flops.h counts a window) for d128 bf16 at 8k tokens with softcap, ALiBi, both, and a
# window that excludes nothing but runs the option kernels; a 1k window over 16k tokens against
# the plain causal kernel. Every line is printed for each CLI given (e.g. a base tree's and this
# tree's), so old and new costs come from the same run.
#
#   bash scripts/options_cost.sh CLI [CLI...]      (env OPT_KERNELS, default sm80; OPT_ROUNDS, default 2)
set -uo pipefail
kernels="${OPT_KERNELS:-sm80}"
rounds="${OPT_ROUNDS:-2}"
cases=(
  "8k plain|--seqlen 8192 --batch 2 --heads 16"
  "8k softcap 30|--seqlen 8192 --batch 2 --heads 16 --softcap 30"
  "8k alibi|--seqlen 8192 --batch 2 --heads 16 --alibi"
  "8k softcap+alibi|--seqlen 8192 --batch 2 --heads 16 --softcap 30 --alibi"
  "8k window 8191,8191 (options kernel, nothing masked)|--seqlen 8192 --batch 2 --heads 16 --window 8190,8190"
  "16k causal|--seqlen 16384 --batch 1 --heads 16 --causal"
  "16k causal window 1024,0|--seqlen 16384 --batch 1 --heads 16 --causal --window 1024,0"
)
printf "%-52s %-10s %9s %9s %9s %9s\n" case cli fwd_ms bwd_ms fwd_TF bwd_TF
for c in "${cases[@]}"; do
  name="${c%%|*}"
  args="${c#*|}"
  for cli in "$@"; do
    best_f=""; best_b=""
    for r in $(seq "$rounds"); do
      # shellcheck disable=SC2086
      line=$("$cli" run --device cuda --kernels "$kernels" --dtype bf16 --head-dim 128 $args --backward --warmup 3 \
        --repeats 10 --json 2>&1) || { echo "$name: $cli failed: $line"; continue 2; }
      read -r f b fl < <(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(r["ms_forward"], r["ms_backward"], r["flops"])' "$line")
      if [ -z "$best_f" ] || python3 -c "import sys; sys.exit(0 if $f < $best_f else 1)"; then best_f=$f; fi
      if [ -z "$best_b" ] || python3 -c "import sys; sys.exit(0 if $b < $best_b else 1)"; then best_b=$b; fi
    done
    python3 -c '
import sys
name, cli, f, b, fl = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
fwd = fl / 3.5
print(f"{name:<52} {cli:<10} {f:9.3f} {b:9.3f} {fwd / f / 1e9:9.1f} {2.5 * fwd / b / 1e9:9.1f}")' \
      "$name" "$(basename "$(dirname "$(dirname "$cli")")")" "$best_f" "$best_b" "$fl"
  done
done
