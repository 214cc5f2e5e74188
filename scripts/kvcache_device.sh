#!/usr/bin/env bash
# Issue 19's device run, in one call: the forward_kvcache GPU tests (tensor-core decode kernel, its
# 2- and 3-stage variants, the per-chunk page offsets and the FP32-FMA one on subsets; sm90's cluster
# kernel forced on, "cluster"), compute-sanitizer memcheck and racecheck on small cases (the
# default kernels, and the cluster kernel: memcheck_cluster, racecheck_cluster), the Python tests on CUDA, and the decode benchmark
# (bench/kvcache_decode.py) with its A/B variants. Runs on binaries built
# beforehand (BIN, default build/devkv: a trimmed build, FLASHCORE_PASSES=decode, with the test
# binary and libflashcore_c.so copied flat into it), so the GPU's time goes to running, not
# compiling. AB_TESTS="v1 v2" runs the cluster tests once more under each FLASHCORE_DECODE_AB variant
# of an A/B build (step ab_<v>), AB_SANITIZE="v1" memcheck and racecheck too (memcheck_ab_<v>,
# racecheck_ab_<v>). SKIP="pytest fma_bench ..." leaves steps out; BENCH_ARGS (default --append) goes to the
# main benchmark; TEST_TIMEOUT / SANITIZER_TIMEOUT (s) cap each test / sanitizer step. Logs and JSON go to $OUT (the device
# tool returns at most 8 files: skip steps or pack them). PARALLEL=1 runs the correctness steps (GPU
# tests, memcheck, racecheck) at the same time, before the benchmarks run alone: they check, not
# time, and the device's held time is what a call costs (session 10: one call of ~160 s held).
# The A/B kernels of a build with -DFLASHCORE_DECODE_AB_VARIANTS=ON are timed by the main benchmark
# itself (BENCH_ARGS="--ab strided,pdl_merge,..."; bench/kvcache_decode.py --help and
# decode_launch_template.h list the variants).
#
# Session 7 built the binaries on the (GPU-less) workstation and carried them:
#   cmake -S . -B build/devkv -G Ninja -DFLASHCORE_CUDA=ON -DFLASHCORE_CUDA_ARCHS=90-real \
#     -DFLASHCORE_KERNEL_FAMILIES="sm80;sm90" -DFLASHCORE_PASSES=decode -DFLASHCORE_BUILD_EXAMPLES=OFF \
#     -DCUTLASS_DIR=... -DFLASHCORE_GTEST_SOURCE_DIR=...
#   ninja -C build/devkv flashcore_gpu_tests flashcore_c
#   then build/devkv/{tests/gpu/flashcore_gpu_tests,src/c_api/libflashcore_c.so} -> <carried copy>/build/devkv/
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${OUT:-$root/build/device-out}"
mkdir -p "$out"
bin="${BIN:-build/devkv}"
skip=" ${SKIP:-} "
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export FLASHCORE_LIBRARY="$root/$bin/libflashcore_c.so"
tests="$root/$bin/flashcore_gpu_tests"
log="$out/steps.txt"
step() { echo "=== $* ($(date +%T))" | tee -a "$log"; }
wanted() { [[ "$skip" != *" $1 "* ]]; }
gtest() {  # name, env assignment or "", filter
  local name=$1 envs=$2 filter=$3
  step "gpu tests: $name"
  env $envs timeout "${TEST_TIMEOUT:-120}" "$tests" --gtest_filter="$filter" >"$out/gpu_tests_$name.txt" 2>&1
  echo "rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$out/gpu_tests_$name.txt" | tr '\n' ' ')" | tee -a "$log"
  grep -E '^\[  FAILED  \]' "$out/gpu_tests_$name.txt" | head -10 | tee -a "$log"
}

memcheck() {  # [name suffix, env assignment, filter]: the defaults check the default kernels
  local name=${1:-} envs=${2:-} filter=${3:-${MEMCHECK_FILTER:-CudaKvCacheSanitize*:CudaKvCacheValidation*:Cases/CudaKvCache.MatchesReferenceAndAppends/paged_1_gqa_bf16_splits3:Cases/CudaKvCache.MatchesReferenceAndAppends/speculative_causal_sq4_fp16}}
  step "compute-sanitizer memcheck $name"
  env $envs timeout "${SANITIZER_TIMEOUT:-120}" compute-sanitizer --tool memcheck --error-exitcode 3 "$tests" --gtest_filter="$filter" \
    >"$out/memcheck$name.txt" 2>&1
  echo "rc=$? $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' "$out/memcheck$name.txt" | tr '\n' ' ')" | tee -a "$log"
}
racecheck() {
  local name=${1:-} envs=${2:-} filter=${3:-${RACECHECK_FILTER:-CudaKvCacheSanitize*:Cases/CudaKvCache.MatchesReferenceAndAppends/paged_1_gqa_bf16_splits3:Cases/CudaKvCache.MatchesReferenceAndAppends/speculative_causal_sq4_fp16}}
  step "compute-sanitizer racecheck $name"
  env $envs timeout "${SANITIZER_TIMEOUT:-150}" compute-sanitizer --tool racecheck --error-exitcode 3 "$tests" --gtest_filter="$filter" \
    >"$out/racecheck$name.txt" 2>&1
  echo "rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|^\[  (PASSED|FAILED) ' "$out/racecheck$name.txt" | tr '\n' ' ')" | tee -a "$log"
}
# MMA_FILTER: the default kernels' tests; CLUSTER_TESTS: those run with the cluster kernel forced on
# (cluster_nan runs the ~34 s NaN test apart, so PARALLEL=1 can spread it).
mma_filter="${MMA_FILTER:-*KvCache*}"
cluster_tests="${CLUSTER_TESTS:-*KvCache*bf16*:*KvCacheSanitize*:*KvCacheValidation*:-*NanPastTheSequence*}"
# sm90's cluster decode kernel (FLASHCORE_DECODE_CLUSTER=on: every bf16 problem up to d128 that
# kernels=auto gives the sm90 row, whatever the split count) under the sanitizers.
cluster_filter="${CLUSTER_SANITIZE_FILTER:-CudaKvCacheSanitize.DecodeGqaPagedAndContiguous:CudaKvCacheSanitize.ClusterSplitCounts:CudaKvCacheSanitize.RepeatedCallsShareTheWorkspace:Cases/CudaKvCache.MatchesReferenceAndAppends/paged_16_rotary_interleaved_bf16_splits3:Cases/CudaKvCache.MatchesReferenceAndAppends/long_splits_auto_bf16}"

step gpu
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$log"
if [[ "${PARALLEL:-0}" == 1 ]]; then
  # Each step's summary goes to a log of its own, appended to steps.txt after the wait.
  wanted mma && (log="$out/steps_mma.txt" && gtest mma "" "$mma_filter") &
  wanted cluster && (log="$out/steps_cluster.txt" && gtest cluster FLASHCORE_DECODE_CLUSTER=on "$cluster_tests") &
  wanted cluster_nan && (log="$out/steps_cluster_nan.txt" && gtest cluster_nan FLASHCORE_DECODE_CLUSTER=on '*NanPastTheSequence*') &
  wanted memcheck && (log="$out/steps_memcheck.txt" && memcheck) &
  wanted racecheck && (log="$out/steps_racecheck.txt" && racecheck) &
  wanted memcheck_cluster && (log="$out/steps_memcheck_cluster.txt" && memcheck _cluster FLASHCORE_DECODE_CLUSTER=on "$cluster_filter") &
  wanted racecheck_cluster && (log="$out/steps_racecheck_cluster.txt" && racecheck _cluster FLASHCORE_DECODE_CLUSTER=on "$cluster_filter") &
  for v in ${AB_TESTS:-}; do
    wanted "ab_$v" && (log="$out/steps_ab_$v.txt" && gtest "ab_$v" "FLASHCORE_DECODE_AB=$v" "$cluster_tests") &
  done
  for v in ${AB_SANITIZE:-}; do
    wanted "memcheck_ab_$v" && (log="$out/steps_memcheck_ab_$v.txt" && memcheck "_ab_$v" "FLASHCORE_DECODE_AB=$v" "$cluster_filter") &
    wanted "racecheck_ab_$v" && (log="$out/steps_racecheck_ab_$v.txt" && racecheck "_ab_$v" "FLASHCORE_DECODE_AB=$v" "$cluster_filter") &
  done
  wait
  for f in "$out"/steps_?*.txt; do [[ -f "$f" ]] && cat "$f" >>"$log" && rm "$f"; done
  skip="$skip mma cluster cluster_nan memcheck racecheck memcheck_cluster racecheck_cluster "
  for v in ${AB_TESTS:-} ${AB_SANITIZE:-}; do skip="$skip ab_$v memcheck_ab_$v racecheck_ab_$v "; done
fi
wanted mma && gtest mma "" "$mma_filter"
wanted cluster && gtest cluster FLASHCORE_DECODE_CLUSTER=on "$cluster_tests"
wanted cluster_nan && gtest cluster_nan FLASHCORE_DECODE_CLUSTER=on '*NanPastTheSequence*'
wanted mma2 && gtest mma2 FLASHCORE_DECODE_STAGES=2 '*KvCache*bf16*:*KvCacheSanitize*:*KvCacheValidation*'
wanted mma3 && gtest mma3 FLASHCORE_DECODE_STAGES=3 '*KvCache*bf16*:*KvCacheSanitize*:*KvCacheValidation*'
wanted fma && gtest fma FLASHCORE_DECODE_KERNEL=fma '*KvCache*bf16*:*KvCacheSanitize*:*KvCacheValidation*'
wanted per_chunk && gtest per_chunk FLASHCORE_DECODE_PAGE_IDS=per-chunk '*KvCache*paged*bf16*'
wanted memcheck && memcheck
wanted racecheck && racecheck
wanted memcheck_cluster && memcheck _cluster FLASHCORE_DECODE_CLUSTER=on "$cluster_filter"
wanted racecheck_cluster && racecheck _cluster FLASHCORE_DECODE_CLUSTER=on "$cluster_filter"
for v in ${AB_TESTS:-}; do wanted "ab_$v" && gtest "ab_$v" "FLASHCORE_DECODE_AB=$v" "$cluster_tests"; done
for v in ${AB_SANITIZE:-}; do
  wanted "memcheck_ab_$v" && memcheck "_ab_$v" "FLASHCORE_DECODE_AB=$v" "$cluster_filter"
  wanted "racecheck_ab_$v" && racecheck "_ab_$v" "FLASHCORE_DECODE_AB=$v" "$cluster_filter"
done
if wanted pytest; then
  step "python tests on cuda"
  PYTHONPATH=python timeout 90 python3 -m pytest -q -p no:cacheprovider python/tests/test_kvcache.py -k cuda \
    >"$out/pytest.txt" 2>&1
  echo "rc=$? $(tail -1 "$out/pytest.txt")" | tee -a "$log"
fi
if wanted bench; then
  step "decode benchmark"
  PYTHONPATH=python timeout 180 python3 -W ignore bench/kvcache_decode.py ${BENCH_ARGS---append} --split-sweep "${SWEEP:-}" \
    --profile-batches "${PROFILE:-1,8}" --out "$out/bench.json" 2>&1 | tee -a "$log"
fi
if wanted bench2; then
  step "decode benchmark, 2 stages"
  FLASHCORE_DECODE_STAGES=2 PYTHONPATH=python timeout 90 python3 -W ignore bench/kvcache_decode.py --skip-sdpa \
    --label _2stages --out "$out/bench_2stages.json" 2>&1 | tee -a "$log"
fi
if wanted bench_combine_kernel; then
  step "decode benchmark, separate combine kernel (A/B of the fused merge)"
  FLASHCORE_DECODE_COMBINE=kernel PYTHONPATH=python timeout 90 python3 -W ignore bench/kvcache_decode.py --skip-sdpa \
    --batches "${AB_BATCHES:-1,8}" --label _combine_kernel --out "$out/bench_combine_kernel.json" 2>&1 | tee -a "$log"
fi
if wanted bench_stream_ordered; then
  step "decode benchmark, stream-ordered split workspace each call (A/B of the cached one)"
  FLASHCORE_DECODE_WORKSPACE=stream-ordered PYTHONPATH=python timeout 90 python3 -W ignore bench/kvcache_decode.py --skip-sdpa \
    --batches "${AB_BATCHES:-1,8}" --label _stream_ordered --out "$out/bench_stream_ordered.json" 2>&1 | tee -a "$log"
fi
if wanted bench_per_chunk; then
  step "decode benchmark, page offsets per chunk (v5's paged kernel; A/B of one lane a key)"
  FLASHCORE_DECODE_PAGE_IDS=per-chunk PYTHONPATH=python timeout 90 python3 -W ignore bench/kvcache_decode.py --skip-sdpa \
    --pages "${PER_CHUNK_PAGES:-0,16}" --label _per_chunk --out "$out/bench_per_chunk.json" 2>&1 | tee -a "$log"
fi
if wanted fma_bench; then
  step "decode benchmark, FP32-FMA kernel"
  FLASHCORE_DECODE_KERNEL=fma PYTHONPATH=python timeout 60 python3 -W ignore bench/kvcache_decode.py --skip-sdpa \
    --label _fma --out "$out/bench_fma.json" 2>&1 | tee -a "$log"
fi
step done
