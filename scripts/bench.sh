#!/usr/bin/env bash
# The benchmark in one command, on a machine with a CUDA GPU and PyTorch (nothing is installed):
#   bash scripts/bench.sh --quick    smoke test: a few cells, under a minute
#   bash scripts/bench.sh            full sweep: flashcore vs SDPA's backends, under 10 minutes on an H100
#   bash scripts/bench.sh --profile  Nsight Compute profile of flashcore's kernels (bench/profile.py)
# It checks the set-up (GPU, PyTorch with CUDA, matplotlib, the flashcore package, the CLI), then runs
# bench/bench.py with the arguments given (python3 bench/bench.py --help). Results go to bench/results/;
# `--out-dir DIR --flat` puts every file in DIR instead. Python: $PYTHON, else python3. The package
# under python/ is put on PYTHONPATH; the CLI is build/sm90-sm90a/tools/flashcore unless --cli PATH.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3}"
export PYTHONPATH="$root/python:$root/bench${PYTHONPATH:+:$PYTHONPATH}"
if [ "${1:-}" = "--profile" ]; then
  shift
  exec "$py" bench/profile.py "$@"
fi
rc=0
"$py" -m flashbench.setup_check "$@" || rc=$?
if [ "$rc" -eq 1 ]; then
  exit 1
elif [ "$rc" -ne 0 ]; then
  echo "bench: the set-up check itself failed (exit $rc); running the benchmark anyway" >&2
fi
exec "$py" bench/bench.py "$@"
