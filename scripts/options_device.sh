#!/usr/bin/env bash
# One device call for the options work (issue 16), on binaries built beforehand on a CPU machine
# (so the lease's time goes to running): the GPU suite and the fuzzer on the sm80 family, the
# plain-kernel A/B against a base tree, each option's cost, then the varlen Python tests and
# benchmark, and a time-boxed sample of flash_attn's own tests through scripts/fa_compat.
#   prebuilt/opt/flashcore_gpu_tests              the tree under test (sm80, d64/d128, bf16+fp16)
#   build/ab-new/tools/flashcore                  its CLI (same build), also scripts/ab.sh's "new"
#   build/ab-base/tools/flashcore                 the base tree's CLI (sm80, d128 bf16)
#   prebuilt/varlen/libflashcore_c.so             a later tree with varlen (sm80, d128 bf16)
#   prebuilt/test_flash_attn.py                   flash_attn's test file (fetched, not committed)
# Built on the CPU machine from snapshots (git archive <commit> | tar -x -C DIR), e.g. for the tree:
#   cmake -S DIR -B DIR/build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA=ON \
#     -DFLASHCORE_CUDA_ARCHS=90-real -DFLASHCORE_KERNEL_FAMILIES=sm80 "-DFLASHCORE_HEAD_DIMS=64;128" \
#     "-DFLASHCORE_DTYPES=bf16;fp16" -DFLASHCORE_BUILD_EXAMPLES=OFF -DCUTLASS_DIR=... -DFLASHCORE_GTEST_SOURCE_DIR=...
#   ninja -C DIR/build/gpu flashcore_gpu_tests flashcore_cli flashcore_c
# then copied (strip -g) into the device folder with the tree; the binaries link libcudart.so.13,
# found on the device under /usr/local/cuda (LD_LIBRARY_PATH below). Failures naming a head dim
# the build lacks are the trimming, not bugs. About 300 s on the H100 (2026-11-24).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-build/device-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
t0=$(date +%s)
stamp() { echo "=== $1 (+$(( $(date +%s) - t0 )) s)"; }
# gtest counts from a full (not brief) log, so a run cut by its timeout still reports what ran.
summary() {
  echo "ok $(grep -c '^\[       OK \]' "$1"), failed $(grep -c '^\[  FAILED  \].*(' "$1"), skipped $(grep -c '^\[  SKIPPED \]' "$1")"
  grep -E '^\[  FAILED  \].*\(' "$1" | head -10; grep -E "tests ran" "$1"
}

stamp "gpu tests: options, masks, dispatch, errors (sm80 family)"
timeout 60 prebuilt/opt/flashcore_gpu_tests \
  --gtest_filter='*ScoreOptions*:*MaskTripCounts*:*KernelFamily*:*Errors*:*Varlen*' >"$out/gpu_tests_options.log" 2>&1
echo "rc $?"; summary "$out/gpu_tests_options.log"
stamp "gpu tests: the plain grid (forward, backward, staged, deterministic, streams, workspace)"
timeout 75 prebuilt/opt/flashcore_gpu_tests --gtest_filter='*CudaForward*:*CudaBackward*' \
  >"$out/gpu_tests_plain.log" 2>&1
echo "rc $?"; summary "$out/gpu_tests_plain.log"

stamp "fuzz with options, sm80"
timeout 45 build/ab-new/tools/flashcore fuzz --device cuda --kernels sm80 --count 300 --seed 5 >"$out/fuzz.log" 2>&1
echo "rc $?"; grep -vE "^\s*skipped " "$out/fuzz.log" | tail -8

stamp "A/B plain kernels (base dd3e29c vs new), d128 bf16, sm80"
AB_PREBUILT=1 AB_PASS=both AB_ROUNDS=2 AB_HEAD_DIMS=128 AB_CARRY=. AB_ARGS="--kernels sm80" \
  AB_SHAPES="128:8192:0 128:16384:1" OUT="$out" timeout 80 bash scripts/ab.sh . 2>&1 | tail -12

stamp "option costs (base and new), d128 bf16, sm80"
OPT_ROUNDS=1 timeout 100 bash scripts/options_cost.sh build/ab-base/tools/flashcore build/ab-new/tools/flashcore 2>&1 | tee "$out/options_cost.txt"

export FLASHCORE_LIBRARY="$PWD/prebuilt/varlen/libflashcore_c.so" PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1
stamp "varlen python tests on CUDA (bf16; d128 build)"
timeout 60 python3 -m pytest -q -p no:cacheprovider python/tests/test_varlen.py -k "cuda and (bf16 or dense)" 2>&1 | tail -6

stamp "varlen benchmark"
timeout 45 python3 bench/varlen_bench.py 2>&1 | tail -8

stamp "flash_attn's tests, a sample"
timeout 75 python3 scripts/fa_compat/run_sample.py prebuilt/test_flash_attn.py --fraction 0.0005 --seed 16 --budget 35 --out "$out" 2>&1 | tail -30
stamp done
