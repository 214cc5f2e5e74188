#!/usr/bin/env bash
# One device call for the sm90 forward's option kernels (issue 16 on Hopper): correctness, sanitizer
# and the option costs, on binaries built beforehand on a CPU machine, e.g.
#   cmake -S . -B build/opt -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA=ON -DFLASHCORE_CUDA_ARCHS=90-real \
#     -DFLASHCORE_KERNEL_FAMILIES=sm90 -DFLASHCORE_PASSES=fwd "-DFLASHCORE_HEAD_DIMS=64;128" \
#     "-DFLASHCORE_DTYPES=bf16;fp16" -DFLASHCORE_BUILD_EXAMPLES=OFF -DCUTLASS_DIR=... -DFLASHCORE_GTEST_SOURCE_DIR=...
#   ninja -C build/opt flashcore_gpu_tests flashcore_cli
# and copied (strip -g) to prebuilt/sm90opt/{flashcore_gpu_tests,flashcore}. The build holds the sm90
# forward only (plain and option rows), so backward draws of the fuzz are skipped (NotSupported) and
# tests needing sm80 are not run here.
#   1. GPU tests, FLASHCORE_KERNELS=sm90: the option cases' forward (both dtypes, d <= 128), the mask
#      trip counts, the plain-row preference, and the plain forward grid
#   2. compute-sanitizer memcheck and racecheck on the sweep (every compiled row; option rows with all
#      options on the first shape)
#   3. fuzz on sm90 with the score options drawn (FUZZ_COUNT, default 3000)
#   4. forward timings, d128 bf16 and a few fp16 rows (scripts/options_cost.sh's cases, forward only,
#      sm90); TIMING_ROUNDS rounds (default 2, rounds outermost), TIMING_CASES a regex on the case
#      names (default all)
#   resources: cuobjdump's registers and stack per forward kernel
#   varlen: the varlen forward cases on sm90 (window/softcap/ALiBi/dropout with cu_seqlens: the option
#      kernels declare varlen), sanitize_varlen: memcheck + racecheck on them
#   ncu (only when STEPS names it): Nsight Compute's stall reasons, scheduler and pipe statistics of
#      one forward kernel launch each, 8k d128 bf16: plain, softcap, ALiBi, window-only, causal and
#      not (docs/tuning/forward_sm90_options.md: where the option kernels' time goes); ~1 min
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-build/device-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
bin=prebuilt/sm90opt
tests="$bin/flashcore_gpu_tests"
cli="$bin/flashcore"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
t0=$(date +%s)
stamp() { echo "=== $1 (+$(( $(date +%s) - t0 )) s)"; }
# No prebuilt binaries: build them here (the same trimmed configuration, every core).
if [ ! -x "$tests" ]; then
  stamp "build (sm90 forward only, d64/d128, bf16+fp16)"
  cmake -S . -B build/opt -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA=ON -DFLASHCORE_CUDA_ARCHS=90-real \
    -DFLASHCORE_KERNEL_FAMILIES=sm90 -DFLASHCORE_PASSES=fwd "-DFLASHCORE_HEAD_DIMS=64;128" "-DFLASHCORE_DTYPES=bf16;fp16" \
    -DFLASHCORE_BUILD_EXAMPLES=OFF -DCUTLASS_DIR="$PWD/../.carry/cutlass_include" \
    -DFLASHCORE_GTEST_SOURCE_DIR="$PWD/../.carry/googletest" >"$out/configure.log" 2>&1 || { tail -20 "$out/configure.log"; exit 1; }
  ninja -C build/opt -j"$(nproc)" flashcore_gpu_tests flashcore_cli >"$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
  echo "spill warnings: $(grep -c 'spill' "$out/build.log")"; grep -E "C75(08|17)" "$out/build.log" | head -3
  tests=build/opt/tests/gpu/flashcore_gpu_tests
  cli=build/opt/tools/flashcore
fi
# STEPS: which of options, plain, sanitize, sanitize_window, fuzz, timings, ncu run (default all but ncu).
want() { [[ " ${STEPS:-options plain sanitize sanitize_window fuzz timings} " == *" $1 "* ]]; }
summary() {
  echo "ok $(grep -c '^\[       OK \]' "$1"), failed $(grep -c '^\[  FAILED  \].*(' "$1"), skipped $(grep -c '^\[  SKIPPED \]' "$1")"
  grep -E '^\[  FAILED  \].*\(' "$1" | head -20; grep -E "tests ran" "$1"
}

if want resources; then
stamp "registers / stack of the forward kernels (cuobjdump)"
cuobjdump --dump-resource-usage "$tests" 2>/dev/null | grep -A1 "Function.*fwd_kernel" | grep -v '^--' | paste - - |
  sed -E 's/.*Function ([^ :]*):.*REG:([0-9]+) STACK:([0-9]+).*/\2 \3 \1/' | while read -r reg stack name; do
    echo "REG $reg STACK $stack $(echo "$name" | c++filt | grep -oE 'FwdTraits<[^>]*>|Scheduler[^,]*|FwdVariant\)[0-9]' | tr '\n' ' ')"
  done | tee "$out/resources.txt"
fi
if want options; then
stamp "gpu tests (sm90): option forwards, trip counts, plain-row preference"
FLASHCORE_KERNELS=sm90 timeout 90 "$tests" \
  --gtest_filter='*CudaScoreOptions.Forward*:*MaskTripCounts*:*PlainCallsRunThePlainRow*-*d256*' >"$out/gpu_tests_options.log" 2>&1
echo "rc $?"; summary "$out/gpu_tests_options.log"
fi
if want plain; then
stamp "gpu tests (sm90): the plain forward grid"
FLASHCORE_KERNELS=sm90 timeout 60 "$tests" --gtest_filter='*CudaForward*' >"$out/gpu_tests_plain.log" 2>&1
echo "rc $?"; summary "$out/gpu_tests_plain.log"
fi

if want varlen; then
stamp "gpu tests (sm90): varlen forwards, options included"
FLASHCORE_KERNELS=sm90 timeout 90 "$tests" --gtest_filter='*CudaVarlen.ForwardOnEachFamily*' \
  >"$out/gpu_tests_varlen.log" 2>&1
echo "rc $?"; summary "$out/gpu_tests_varlen.log"
fi
if want sanitize_varlen; then
stamp "compute-sanitizer memcheck + racecheck: the varlen forwards with options"
for tool in memcheck racecheck; do
  FLASHCORE_KERNELS=sm90 timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 3 "$tests" \
    --gtest_filter='*CudaVarlen.ForwardOnEachFamily*window*:*CudaVarlen.ForwardOnEachFamily*options*' \
    >"$out/sanitize_varlen_$tool.log" 2>&1 &
done
wait
for tool in memcheck racecheck; do
  echo "varlen cases $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/sanitize_varlen_$tool.log" | tr '\n' ' ')"
done
fi

if want sanitize; then
stamp "compute-sanitizer memcheck + racecheck: the sweep"
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 3 "$tests" --gtest_filter='CudaSanitizeSweep.*' \
    >"$out/sweep_$tool.log" 2>&1 &
done
wait
for tool in memcheck racecheck; do
  echo "sweep $tool: $(grep -E 'sweep:|ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/sweep_$tool.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure" "$out/sweep_$tool.log" | head -5
done
fi

if want sanitize_window; then
stamp "compute-sanitizer memcheck + racecheck: the window-only option cases (the window kernel; SANITIZE_FILTER)"
for tool in memcheck racecheck; do
  FLASHCORE_KERNELS=sm90 timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 3 "$tests" \
    --gtest_filter="${SANITIZE_FILTER:-*CudaScoreOptions.Forward*window*-*d256*}" >"$out/sanitize_window_$tool.log" 2>&1 &
done
wait
for tool in memcheck racecheck; do
  echo "window cases $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/sanitize_window_$tool.log" | tr '\n' ' ')"
done
fi
if want fuzz; then
stamp "fuzz (sm90, score options drawn)"
timeout 100 "$cli" fuzz --device cuda --kernels sm90 --count "${FUZZ_COUNT:-3000}" --seed "${FUZZ_SEED:-2026}" \
  --max-elements "${FUZZ_MAX_ELEMENTS:-1048576}" --json >"$out/fuzz_sm90_options.json" 2>"$out/fuzz_sm90_options.err"
echo "rc $?"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print({k: r[k] for k in ('count','passed','failed','skipped','seconds')}, r.get('skip_reasons')); [print(f) for f in r.get('failures', [])[:5]]" \
  "$out/fuzz_sm90_options.json" || tail -5 "$out/fuzz_sm90_options.err"
fi

if want ncu; then
stamp "ncu: one forward launch per case (8k d128 bf16, sm90)"
ncu_cases=(
  "plain|" "softcap|--softcap 30" "alibi|--alibi" "window|--window 8190,8190"
  "causal_plain|--causal" "causal_softcap|--causal --softcap 30" "causal_alibi|--causal --alibi"
  "causal_window_1k_16k|--causal --window 1024,0 --seqlen 16384 --batch 1"
)
[ -n "${NCU_CASES:-}" ] && mapfile -t ncu_cases < <(for c in "${ncu_cases[@]}"; do [[ "${c%%|*}" =~ ^(${NCU_CASES})$ ]] && echo "$c"; done)
for c in "${ncu_cases[@]}"; do
  name="${c%%|*}"; args="${c#*|}"
  # shellcheck disable=SC2086
  timeout 120 ncu --clock-control none --kernel-name regex:fwd_kernel --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats \
    --section ComputeWorkloadAnalysis --csv --page details \
    "$cli" run --device cuda --kernels sm90 --dtype bf16 --head-dim 128 --seqlen 8192 --batch 2 --heads 16 $args \
    --warmup 1 --repeats 1 >"$out/ncu_$name.csv" 2>"$out/ncu_$name.err" || { echo "ncu $name: rc $?"; tail -3 "$out/ncu_$name.err"; }
  grep -E '"(Duration|Issue Slots Busy|No Eligible|Stall|Warp Cycles Per Issued Instruction|Executed Ipc Active)' \
    "$out/ncu_$name.csv" | awk -F'","' -v n="$name" '{print n ": " $(NF-2) " = " $NF}' | tr -d '"' | head -20
done
fi

want timings || { stamp "done"; exit 0; }
stamp "forward timings (d128 bf16, sm90)"
cases=(
  "8k plain|--seqlen 8192 --batch 2 --heads 16"
  "8k softcap 30|--seqlen 8192 --batch 2 --heads 16 --softcap 30"
  "8k alibi|--seqlen 8192 --batch 2 --heads 16 --alibi"
  "8k softcap+alibi|--seqlen 8192 --batch 2 --heads 16 --softcap 30 --alibi"
  "8k window 8190,8190|--seqlen 8192 --batch 2 --heads 16 --window 8190,8190"
  "8k causal plain|--seqlen 8192 --batch 2 --heads 16 --causal"
  "8k causal softcap 30|--seqlen 8192 --batch 2 --heads 16 --causal --softcap 30"
  "8k causal alibi|--seqlen 8192 --batch 2 --heads 16 --causal --alibi"
  "8k causal window 8190,0|--seqlen 8192 --batch 2 --heads 16 --causal --window 8190,0"
  "16k causal plain|--seqlen 16384 --batch 1 --heads 16 --causal"
  "16k causal window 1024,0|--seqlen 16384 --batch 1 --heads 16 --causal --window 1024,0"
  "16k plain|--seqlen 16384 --batch 1 --heads 16"
  "8k causal window 1024,0|--seqlen 8192 --batch 2 --heads 16 --causal --window 1024,0"
  "16k causal window 2048,0|--seqlen 16384 --batch 1 --heads 16 --causal --window 2048,0"
  "8k softcap 50|--seqlen 8192 --batch 2 --heads 16 --softcap 50"
  "8k fp16 plain|--seqlen 8192 --batch 2 --heads 16 --dtype fp16"
  "8k fp16 softcap 30|--seqlen 8192 --batch 2 --heads 16 --dtype fp16 --softcap 30"
  "8k fp16 alibi|--seqlen 8192 --batch 2 --heads 16 --dtype fp16 --alibi"
)
[ -n "${TIMING_CASES:-}" ] && mapfile -t cases < <(for c in "${cases[@]}"; do [[ "${c%%|*}" =~ ${TIMING_CASES} ]] && echo "$c"; done)
: >"$out/timings.jsonl"
cp /dev/null "$out/timings.txt"
# Rounds outermost, so each case's rounds are spread over the run (clock and thermal drift).
for r in $(seq "${TIMING_ROUNDS:-2}"); do
  for c in "${cases[@]}"; do
    name="${c%%|*}"; args="${c#*|}"
    # shellcheck disable=SC2086
    line=$("$cli" run --device cuda --kernels "${BENCH_KERNELS:-sm90}" --dtype bf16 --head-dim 128 $args --warmup 5 \
      --repeats 20 --json 2>&1) || { echo "$name: failed: $line"; continue; }
    echo "{\"case\": \"$name\", \"round\": $r, \"row\": $line}" >>"$out/timings.jsonl"
  done
done
python3 - "$out/timings.jsonl" <<'PY' | tee "$out/timings.txt"
import json, sys
best = {}
for l in open(sys.argv[1]):
    r = json.loads(l); row = r["row"]
    if r["case"] not in best or row["ms"] < best[r["case"]]["ms"]: best[r["case"]] = row
for name, row in best.items():
    print(f"{name:<30} {row['kernels_forward']} {row['ms']:8.3f} ms {row['tflops']:7.1f} TFLOP/s")
PY
stamp "done"
