#!/usr/bin/env bash
# Issue 17 on a machine with several GPUs of one host (the device tool's nvidia-h200-x2): build what
# ring attention needs, run its tests on the GPUs, then bench/ring.py's correctness check and scaling
# benchmark. Logs and the results JSON go to $OUT (the device tool's return folder) or
# build/device-out.
#
#   bash scripts/ring_device.sh [STEP...]      default: build test ring
#   build   configure build/ring (sm80 + sm90 families for compute capability 9.0, head dims
#           32/64/128, fp16 + bf16: what the tests and the benchmark call) and build the C library
#           and the GPU test binary, with every core (about 3 minutes on 32)
#   test    the merge kernel's GPU tests (gtest *Merge*) and python/tests/test_distributed.py on CUDA
#           (2 processes over NCCL; the 3-process case skips on 2 GPUs, saying why)
#   ring    python3 bench/ring.py check bench: ring vs the whole sequence under FlashAttention's rule at
#           GPU sizes, then 32k/64k/128k tokens on 1 GPU vs the ring (with NCCL, without sends, sends
#           alone) -> $OUT/ring_<device>-x<gpus>_<date>_<commit>.json; RING_ARGS adds arguments
#   COMMIT=<sha> names the commit in the results (a copied tree's .git may be stale or absent).
set -uo pipefail
# NVLink multicast stays off on the lent machines, also for every process started from here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${OUT:-$root/build/device-out}"
mkdir -p "$out"
build_dir=build/ring
configure_args=()
[ -f .carry/cutlass_include/cute/tensor.hpp ] && configure_args+=("-DCUTLASS_DIR=$root/.carry/cutlass_include")
[ -f .carry/googletest/CMakeLists.txt ] && configure_args+=("-DFLASHCORE_GTEST_SOURCE_DIR=$root/.carry/googletest")
export FLASHCORE_LIBRARY="$root/$build_dir/src/c_api/libflashcore_c.so"
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
[ -n "${COMMIT:-}" ] && export FLASHCORE_COMMIT="$COMMIT"
status=0

[ $# -eq 0 ] && set -- build test ring
for step in "$@"; do
  echo "=== ring_device.sh: $step ($(date +%T))"
  case "$step" in
    build)
      nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader || true
      nvidia-smi topo -m || true
      python3 -c 'import torch; print("torch", torch.__version__, "GPUs", torch.cuda.device_count(), "NCCL", torch.cuda.nccl.version())'
      cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCORE_CUDA=ON \
        -DFLASHCORE_CUDA_ARCHS=90-real -DFLASHCORE_KERNEL_FAMILIES="sm80;sm90" -DFLASHCORE_HEAD_DIMS="32;64;128" \
        -DFLASHCORE_DTYPES="fp16;bf16" -DFLASHCORE_BUILD_EXAMPLES=OFF "${configure_args[@]}" \
        >"$out/ring_configure.log" 2>&1 || { tail -20 "$out/ring_configure.log"; exit 1; }
      start=$(date +%s)
      if ! cmake --build "$build_dir" -j"$(nproc)" --target flashcore_c flashcore_gpu_tests >"$out/ring_build.log" 2>&1; then
        grep -E "error|FAILED" "$out/ring_build.log" | head -40
        exit 1
      fi
      echo "build: $(( $(date +%s) - start )) s"
      ;;
    test)
      "$build_dir/tests/gpu/flashcore_gpu_tests" --gtest_filter='*Merge*' >"$out/ring_gpu_tests.log" 2>&1 || status=1
      grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran" "$out/ring_gpu_tests.log" | head -20
      python3 -m pytest -q -rs python/tests/test_distributed.py >"$out/ring_python_tests.log" 2>&1 || status=1
      tail -8 "$out/ring_python_tests.log"
      ;;
    ring)
      # shellcheck disable=SC2086
      PYTHONUNBUFFERED=1 python3 bench/ring.py check bench --out-dir "$out" ${RING_ARGS:-} 2>&1 | tee "$out/ring_bench.log"
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
      ;;
    *) echo "ring_device.sh: unknown step '$step'"; exit 2 ;;
  esac
done
exit $status
