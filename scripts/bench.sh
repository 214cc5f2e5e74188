#!/usr/bin/env bash
# The benchmark in one command, on a machine with a CUDA GPU and PyTorch (nothing is installed):
#   bash scripts/bench.sh --quick    smoke test: a few cells, under a minute
#   bash scripts/bench.sh            full sweep: every impl (flashcore auto/sm80/sm90, SDPA backends, ex88),
#                                    fwd/bwd/fwd_bwd, plus GQA rows; more than one 10-minute device call:
#                                    split it with --passes (cells past --budget-s are recorded as not run)
#   bash scripts/bench.sh --hopper   issue 14's run: flashcore auto/sm80/sm90, cuDNN, FA2, CUTLASS ex88;
#                                    forward, bf16+fp16, d64/128/256, 512..16k, causal and not, GQA 4:1/8:1
#   bash scripts/bench.sh --profile  Nsight Compute profile of flashcore's kernels (bench/ncu_profile.py)
#   --build-ex88 (first argument): build CUTLASS example 88 first if it is missing
#                                    (scripts/build_cutlass_ex88.sh; needs nvcc and the wheel's sources)
# It checks the set-up (GPU, PyTorch with CUDA, matplotlib, the flashcore package, the CLI), then runs
# bench/bench.py with the arguments given (python3 bench/bench.py --help). Results go to bench/results/;
# `--out-dir DIR --flat` puts every file in DIR instead. Python: $PYTHON, else python3. The package
# under python/ is put on PYTHONPATH; the CLI is build/sm90-sm90a/tools/flashcore unless --cli PATH;
# example 88 (impl cutlass_ex88) is .carry/ex88/88_hopper_fmha unless --ex88 PATH or $EX88_BIN.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3}"
export PYTHONPATH="$root/python:$root/bench${PYTHONPATH:+:$PYTHONPATH}"
if [ "${1:-}" = "--build-ex88" ]; then
  shift
  EX88_NICE="${EX88_NICE:-0}" bash scripts/build_cutlass_ex88.sh ||
    echo "bench: example 88 could not be built; its cells will be blank with the reason" >&2
fi
if [ "${1:-}" = "--profile" ]; then
  shift
  exec "$py" bench/ncu_profile.py "$@"
fi
rc=0
"$py" -m flashbench.setup_check "$@" || rc=$?
if [ "$rc" -eq 1 ]; then
  exit 1
elif [ "$rc" -ne 0 ]; then
  echo "bench: the set-up check itself failed (exit $rc); running the benchmark anyway" >&2
fi
exec "$py" bench/bench.py "$@"
