#!/usr/bin/env bash
# The one command for a GPU machine (the device tool's, or any CUDA box): build with every core,
# then run the requested steps. Logs go to $OUT (the device tool's return folder) or build/device-out.
#
#   bash scripts/device.sh [STEP...]     default: build test
#   build      configure (preset sm90-sm90a: code for compute capability 9.0 only, for quick builds) and build everything
#   test       ctest: CPU and GPU suites (kernels=auto: on an H100 the sm90 family, and sm80 for the
#              backward at d192/d256 and the score options), then the GPU suite again with every
#              family forced in turn (FLASHCORE_KERNELS=sm80, then sm90 on the forward and backward
#              tests: a head dim it has no kernel for is skipped with a note), so each family runs the grid
#   sanitize   compute-sanitizer memcheck, racecheck, synccheck and initcheck on the GPU tests named
#              *Sanitize*, once per kernel family (forward and backward for both)
#   sweep      every compiled kernel row (family x dtype x head dim x options; causal, ragged, GQA,
#              both backward modes) under compute-sanitizer memcheck, racecheck, synccheck, initcheck
#   fuzz       `flashcore fuzz` on each family: FUZZ_COUNT (10000) problems, FUZZ_SEED, FUZZ_MAX_ELEMENTS;
#              FUZZ_FAMILIES (default "sm80 sm90"); FUZZ_COUNT_SM90 (default 13000: the sm90 family serves
#              no backward above head dim 128, about a fifth of the draws, so 13000 leave >= 10000 run)
#   python     the Python package's tests on CUDA tensors, against the library just built
#   overhead   python/benchmarks/bench_overhead.py: the binding's host time per eager call (issue 14's
#              B1 H8 S512 D64 fp16 and a tiny shape; forward and forward+backward; flashcore, the C ABI
#              called directly, SDPA with each backend), p50/p90; JSON to $OUT/binding_overhead.json;
#              OVERHEAD_ARGS adds arguments (--breakdown, --latency: issue 14's latency block with the host's share)
#   host-path  bench/host_path's flashcore_host_path_bench: the C ABI's host path step by step (HOST_PATH_LIBS:
#              other builds of libflashcore_c.so to time beside this one)
#   bench-hopper   scripts/bench.sh --hopper: issue 14's forward grid (both kernel families, cuDNN,
#              FA2, CUTLASS example 88 from .carry/ex88, GQA rows, latency eager and graph replay);
#              bench-hopper-bwd: the same grid's backward, as its own call
#   bench      scripts/bench.sh (full sweep);  bench-quick: its --quick smoke run; profile: Nsight
#              Compute on flashcore's kernels. COMMIT=<sha> names the commit (it wins over a .git, which a copied tree may carry stale).
#   FILTER=... narrows the GPU tests of `test` (a gtest filter); PRESET=default builds sm_80 too.
#   BUILD_DIR=... runs binaries built elsewhere (e.g. on a CPU machine and carried: tests/gpu/
#   flashcore_gpu_tests, tools/flashcore, src/c_api/libflashcore_c.so under it; skip `build`).
#   SANITIZE_FILTER / SANITIZE_TOOLS / SANITIZE_FAMILIES narrow `sanitize` (one gtest filter for
#   every family; default all four tools, both families).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${OUT:-$root/build/device-out}"
mkdir -p "$out"
preset="${PRESET:-sm90-sm90a}"
configure_args=()
[ -f .carry/cutlass_include/cute/tensor.hpp ] && configure_args+=("-DCUTLASS_DIR=$root/.carry/cutlass_include")
[ -f .carry/googletest/CMakeLists.txt ] && configure_args+=("-DFLASHCORE_GTEST_SOURCE_DIR=$root/.carry/googletest")
build_dir="${BUILD_DIR:-build/$preset}"
gpu_tests="$build_dir/tests/gpu/flashcore_gpu_tests"
case "$build_dir" in /*) ;; *) build_dir="$root/$build_dir" ;; esac
export FLASHCORE_LIBRARY="$build_dir/src/c_api/libflashcore_c.so"
cli="$build_dir/tools/flashcore"
status=0

[ $# -eq 0 ] && set -- build test
for step in "$@"; do
  echo "=== device.sh: $step ($(date +%T))"
  case "$step" in
    build)
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader || true
      cmake --preset "$preset" "${configure_args[@]}" >"$out/configure.log" 2>&1 || { tail -20 "$out/configure.log"; exit 1; }
      start=$(date +%s)
      if ! cmake --build --preset "$preset" -j"$(nproc)" >"$out/build.log" 2>&1; then
        grep -E "error|FAILED" "$out/build.log" | head -40
        exit 1
      fi
      echo "build: $(( $(date +%s) - start )) s; spills:"; grep -c "spill" "$out/build.log" || true
      ;;
    test)
      if [ -n "${FILTER:-}" ]; then
        "$gpu_tests" --gtest_filter="$FILTER" 2>&1 | tee "$out/gpu_tests.log" | grep -E "^\[  (FAILED|PASSED|SKIPPED) |tests ran|Failure|error" | head -60
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
      else
        ctest --preset "$preset" --output-on-failure >"$out/ctest.log" 2>&1 || status=1
        grep -E "tests passed|Failed|FAILED|\*\*\*" "$out/ctest.log" | head -40
        for family in sm80 sm90; do
          filter='*'
          # A case the forced family does not serve (an option, varlen, a head dim) is skipped with a
          # note (tests/gpu/device_tensors.cpp: run_lacks_kernel), so sm90 takes every option test too.
          [ "$family" = sm90 ] && filter='*CudaForward*:*CudaBackward*:*KernelFamily*:*CudaScoreOptions.*:*CudaVarlen*:*CudaDropout*:*MaskTripCounts*'
          FLASHCORE_KERNELS=$family "$gpu_tests" --gtest_filter="$filter" >"$out/gpu_tests_$family.log" 2>&1 || status=1
          echo "gpu tests, FLASHCORE_KERNELS=$family: $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$out/gpu_tests_$family.log" | tr '\n' ' ')$(grep -c '^note: skipped' "$out/gpu_tests_$family.log") shapes skipped (no kernel)"
        done
      fi
      ;;
    sanitize)
      for family in ${SANITIZE_FAMILIES:-sm80 sm90}; do
        filter='*Sanitize*'
        [ "$family" = sm90 ] && filter='*CudaForwardSanitize*:*CudaBackwardSanitize*'
        filter="${SANITIZE_FILTER:-$filter}"
        for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
          FLASHCORE_KERNELS=$family compute-sanitizer --tool "$tool" --error-exitcode 3 "$gpu_tests" \
            --gtest_filter="$filter" >"$out/sanitize_${family}_$tool.log" 2>&1
          rc=$?
          echo "compute-sanitizer $tool ($family): exit $rc; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/sanitize_${family}_$tool.log" | tr '\n' ' ')"
          [ $rc -eq 0 ] || status=1
        done
      done
      ;;
    sweep)
      # Every compiled kernel (tests/gpu/sanitize_sweep_test.cpp) under the four tools at once: they
      # share the GPU, and each is slowed by its own instrumentation, not by the others.
      for tool in memcheck racecheck synccheck initcheck; do
        compute-sanitizer --tool "$tool" --error-exitcode 3 "$gpu_tests" --gtest_filter='CudaSanitizeSweep.*' \
          >"$out/sweep_$tool.log" 2>&1 &
      done
      wait
      for tool in memcheck racecheck synccheck initcheck; do
        echo "sweep $tool: $(grep -E 'sweep:|ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/sweep_$tool.log" | tr '\n' ' ')"
        grep -qE '^\[  PASSED  \] 1 test' "$out/sweep_$tool.log" && grep -qE 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards' "$out/sweep_$tool.log" || status=1
      done
      ;;
    fuzz)
      # FUZZ_COUNT problems per kernel family (sm90 without score options unless FUZZ_SM90_OPTIONS=1).
      for family in ${FUZZ_FAMILIES:-sm80 sm90}; do
        extra=()
        count="${FUZZ_COUNT:-10000}"
        # FUZZ_SM90_OPTIONS=1 draws them for sm90 too (its forward serves window/softcap/ALiBi at d <= 128;
        # the draws it cannot serve, any backward with an option among them, are then skipped).
        [ "$family" = sm90 ] && [ -z "${FUZZ_SM90_OPTIONS:-}" ] && extra+=(--no-score-options)
        [ "$family" = sm90 ] && count="${FUZZ_COUNT_SM90:-13000}"
        "$cli" fuzz --device cuda --kernels "$family" --count "$count" --seed "${FUZZ_SEED:-2026}" \
          --max-elements "${FUZZ_MAX_ELEMENTS:-1048576}" "${extra[@]}" --json >"$out/fuzz_$family.json" 2>"$out/fuzz_$family.err" || status=1
        python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('fuzz', sys.argv[2], {k: r[k] for k in ('count','passed','failed','skipped','seconds')}, r.get('skip_reasons'))" "$out/fuzz_$family.json" "$family"
      done
      ;;
    python)
      PYTHONPATH="$root/python" python3 -m pytest -q -rs python/tests >"$out/python_tests.log" 2>&1 || status=1
      tail -15 "$out/python_tests.log"
      ;;
    overhead)
      # OVERHEAD_ARGS: more arguments, e.g. "--shapes main --sdpa auto,cudnn --breakdown --latency" (its --help)
      # shellcheck disable=SC2086
      PYTHONPATH="$root/python" python3 python/benchmarks/bench_overhead.py --json "$out/binding_overhead.json" \
        ${OVERHEAD_ARGS:-} 2>&1 | tee "$out/binding_overhead.txt"
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
      ;;
    host-path)
      # bench/host_path: the C ABI's host path step by step, for this build's library and each one
      # HOST_PATH_LIBS names (space-separated: another build, e.g. from before a change), a process each.
      for lib in "$FLASHCORE_LIBRARY" ${HOST_PATH_LIBS:-}; do
        "$build_dir/bench/host_path/flashcore_host_path_bench" "$lib" || status=1
      done 2>&1 | tee "$out/host_path.txt"
      ;;
    bench-hopper) bash scripts/bench.sh --hopper --cli "$cli" --out-dir "$out" --flat || status=1 ;;
    bench-hopper-bwd)
      bash scripts/bench.sh --hopper --passes bwd --no-latency --no-memory --run-name "${RUN_NAME:-hopper}_bwd" \
        --cli "$cli" --out-dir "$out" --flat || status=1 ;;
    bench) bash scripts/bench.sh --cli "$cli" --out-dir "$out" --flat || status=1 ;;
    bench-quick) bash scripts/bench.sh --quick --cli "$cli" --out-dir "$out" --flat || status=1 ;;
    profile) bash scripts/bench.sh --profile --cli "$cli" --out-dir "$out" || status=1 ;;
    *) echo "device.sh: unknown step '$step'"; exit 2 ;;
  esac
done
exit $status
