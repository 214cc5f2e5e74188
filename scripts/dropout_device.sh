#!/usr/bin/env bash
# One device call for dropout (issue 16), on binaries built beforehand on a CPU machine, one folder
# per build to compare (PREBUILT, default "prebuilt"; files may be .xz-compressed to fit the carry):
#   <dir>/flashcore_gpu_tests   the GPU suite
#   <dir>/libflashcore_c.so     the C ABI library of the same build, for the Python tests and bench
# The first folder gets every check below; each further one (an A/B variant) the forced-sm90
# dropout tests and racecheck, then every folder the bench (JSON dropout_bench_<n>.json).
# Built with: cmake -S . -B build/dev -G Ninja -DFLASHCORE_CUDA=ON -DFLASHCORE_CUDA_ARCHS=90-real
#   -DFLASHCORE_KERNEL_FAMILIES="$FAMILIES" -DFLASHCORE_HEAD_DIMS=128 -DFLASHCORE_DTYPES=bf16
#   -DFLASHCORE_BUILD_EXAMPLES=OFF -DCUTLASS_DIR=... -DFLASHCORE_GTEST_SOURCE_DIR=...;
#   ninja -C build/dev flashcore_gpu_tests flashcore_c; strip -g; copied into prebuilt/.
# FAMILIES (environment, default "sm80;sm90") says what the build holds; with sm90 the dropout
# tests also run with FLASHCORE_KERNELS=sm90 (the sm90 forward's option kernels, the backward's
# dropout kernels) and the sanitizers check those. The correctness steps run side by side (they
# time nothing); the bench runs alone at the end.
# Runs: the GPU dropout tests (auto and, with sm90, forced sm90), varlen's dropout cases, the
# dispatch tests, the score-option forward tests (the kernels dropout now shares), compute-sanitizer
# memcheck and racecheck of the dropout kernels on small grids, the Python dropout tests on CUDA,
# and bench/dropout_bench.py (JSON into $OUT).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-build/device-out}"
families="${FAMILIES:-sm80;sm90}"
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
t0=$(date +%s)
stamp() { echo "=== $1 (+$(( $(date +%s) - t0 )) s)"; }
summary() {
  echo "ok $(grep -c '^\[       OK \]' "$1"), failed $(grep -c '^\[  FAILED  \].*(' "$1"), skipped $(grep -c '^\[  SKIPPED \]' "$1")"
  grep -E '^\[  FAILED  \].*\(' "$1" | head -20; grep -E "tests ran" "$1"
  grep -B2 -A8 "Failure" "$1" | head -40
}
read -r -a dirs <<<"${PREBUILT:-prebuilt}"
for d in "${dirs[@]}"; do
  for f in "$d"/*.xz; do [[ -e "$f" ]] && { xz -d -f "$f" || python3 -c "import lzma,sys; open(sys.argv[1][:-3],'wb').write(lzma.open(sys.argv[1]).read())" "$f"; }; done
  chmod +x "$d"/flashcore_gpu_tests 2>/dev/null
done
tests="${dirs[0]}/flashcore_gpu_tests"
lib="$PWD/${dirs[0]}/libflashcore_c.so"
# Only bf16 and d <= 128 are in the build (d40/d64/d96 run padded on the d128 kernels).
auto_filter='*CudaDropout*bf16*:*CudaDropoutDispatch*:*Varlen*dropout*bf16*:*CudaScoreOptions*Forward*bf16*:-*d256*:*fp16*'
# Forced sm90: the forward serves every case; the backward's dropout kernels serve dropout alone.
sm90_filter='*CudaDropout.Forward*bf16*:*CudaDropout.Backward*bf16*:-*d256*:*fp16*:*Backward*all_options*'
sm90_bwd_filter='*CudaDropout.Backward*bf16*:-*d256*:*fp16*:*Backward*all_options*'
small='*CudaDropout*p90_d64_small_bf16*:*CudaDropout*p50_q_longer_d64_bf16*'

stamp "correctness, side by side"
timeout 100 "$tests" --gtest_filter="$auto_filter" >"$out/gpu_tests_auto.log" 2>&1 &
if [[ "$families" == *sm90* ]]; then
  FLASHCORE_KERNELS=sm90 timeout 100 "$tests" --gtest_filter="$sm90_filter" >"$out/gpu_tests_sm90.log" 2>&1 &
  FLASHCORE_KERNELS=sm90 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$tests" \
    --gtest_filter="$small" >"$out/memcheck.log" 2>&1 &
  for ((i = 0; i < ${#dirs[@]}; ++i)); do
    FLASHCORE_KERNELS=sm90 timeout 60 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 9 \
      "${dirs[$i]}/flashcore_gpu_tests" --gtest_filter="$small" >"$out/racecheck_$i.log" 2>&1 &
    if ((i > 0)); then
      FLASHCORE_KERNELS=sm90 timeout 100 "${dirs[$i]}/flashcore_gpu_tests" --gtest_filter="$sm90_bwd_filter" \
        >"$out/gpu_tests_sm90_$i.log" 2>&1 &
    fi
  done
fi
(
  export FLASHCORE_LIBRARY="$lib" PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1
  timeout 100 python3 -m pytest -q -p no:cacheprovider python/tests/test_dropout.py -k "cuda and not fp16" 2>&1 | tail -8
) >"$out/python_dropout.log" 2>&1 &
wait
stamp "gpu tests, kernels=auto"; summary "$out/gpu_tests_auto.log"
if [[ "$families" == *sm90* ]]; then
  stamp "gpu tests, FLASHCORE_KERNELS=sm90"; summary "$out/gpu_tests_sm90.log"
  for ((i = 1; i < ${#dirs[@]}; ++i)); do stamp "gpu tests, sm90 backward, ${dirs[$i]}"; summary "$out/gpu_tests_sm90_$i.log"; done
  stamp "memcheck"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$out/memcheck.log" | head
  for ((i = 0; i < ${#dirs[@]}; ++i)); do
    stamp "racecheck ${dirs[$i]}"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|tests ran|PASSED|FAILED" "$out/racecheck_$i.log" | head
  done
fi
stamp "python dropout tests on CUDA"; cat "$out/python_dropout.log"

export PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1
# BENCH_ROUNDS (default 1): the folders' benches alternate this many times (A/B noise).
for ((r = 0; r < ${BENCH_ROUNDS:-1}; ++r)); do
  for ((i = 0; i < ${#dirs[@]}; ++i)); do
    stamp "bench ${dirs[$i]} (round $r): flashcore vs SDPA FLASH_ATTENTION with dropout"
    FLASHCORE_LIBRARY="$PWD/${dirs[$i]}/libflashcore_c.so" \
      FLASHCORE_BUILD_NOTE="flashcore build ${dirs[$i]}: ${families} families, d128 bf16 (${FLASHCORE_COMMIT:-})" \
      timeout 100 python3 bench/dropout_bench.py "$out/dropout_bench_${i}_r$r.json" 2>&1 | grep -E "ratio|flashcore_dropout|flashcore_plain"
  done
done
stamp done
# At most 8 files come back from a device call: the logs go back as one tarball, the JSON as is.
(cd "$out" && tar -cf logs.tar ./*.log && rm -f ./*.log)
