#!/bin/bash
# Session 7's second device call: the library with v7's exp2-on-FMA turned off again (the A/B of
# the first call measured it 7-9 % slower), checked (check.py, d64/128/256) and run through
# bench-hopper's grid (flashcore, cuDNN, CUTLASS example 88). Logs packed into $OUT/s7b.tgz.
cd "$(dirname "$0")/../.."
root=$PWD
DEVOUT=$OUT
OUT=/tmp/s7b
mkdir -p $OUT
save() { tar czf $DEVOUT/s7b.tgz -C /tmp s7b 2>/dev/null; }
export PYTHONUNBUFFERED=1
t0=$(date +%s)
stamp() { save; echo "--- $1 at +$(( $(date +%s) - t0 )) s"; }
[ -e .carry ] || ln -s ../.carry .carry
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
cmake -S . -B build/s7b -G Ninja -DFLASHCORE_CUDA=ON -DFLASHCORE_CUDA_ARCHS=90-real -DFLASHCORE_KERNEL_FAMILIES=sm90 \
  -DFLASHCORE_PASSES=fwd "-DFLASHCORE_HEAD_DIMS=64;128;256" "-DFLASHCORE_DTYPES=bf16;fp16" -DFLASHCORE_BUILD_EXAMPLES=OFF \
  -DCUTLASS_DIR=$root/.carry/cutlass_include -DFLASHCORE_GTEST_SOURCE_DIR=$root/.carry/googletest > $OUT/configure.log 2>&1 \
  || { tail -20 $OUT/configure.log; exit 1; }
stamp build
source dev/sm90/flags.sh
NVCC_FLAGS="-gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -Xcompiler=-fPIC \
 -I$root/src -I$root/include -I$root/.carry/cutlass_include"
$NVCC $NVCC_FLAGS -DFC_SM90_DIMS_64_128_256_ONLY -c dev/sm90/capi.cu -o /tmp/capi.o > $OUT/capi.log 2>&1 &
cmake --build build/s7b -j 16 --target flashcore_gpu_tests flashcore_c flashcore_cli > $OUT/build.log 2>&1 \
  || { grep -E "error|FAILED" $OUT/build.log | head -30; }
wait
grep -h "C7508\|C7517\|C751" $OUT/build.log | sort | uniq -c | head
grep -h "spill stores" $OUT/build.log | sort | uniq -c
$NVCC -gencode=arch=compute_90a,code=sm_90a -shared -o dev/sm90/libfc_sm90.so /tmp/capi.o $(find build/s7b -name 'fwd_sm90_*.o')
stamp gpu-tests
FLASHCORE_KERNELS=sm90 timeout 60 build/s7b/tests/gpu/flashcore_gpu_tests --gtest_filter='*CudaForward*' > $OUT/gpu_tests_sm90.log 2>&1
echo "gpu tests (sm90, CudaForward*): rc=$? $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' $OUT/gpu_tests_sm90.log | tr '\n' ' ')"
stamp check
(cd dev/sm90 && CHECK_DIMS=64,128,256 CHECK_NAME=check_v7b.json timeout 60 python3 check.py > $OUT/check_v7b.txt 2>&1; echo "check.py rc=$?"; grep "cases" $OUT/check_v7b.txt)
stamp bench-hopper
FLASHCORE_LIBRARY=$root/build/s7b/src/c_api/libflashcore_c.so timeout 200 bash scripts/bench.sh --hopper \
  --impls flashcore,sdpa_cudnn,cutlass_ex88 --no-memory --plots none --cli build/s7b/tools/flashcore \
  --out-dir $OUT/bench --flat --budget-s 170 --commit "${COMMIT:-unknown}" > $OUT/bench_hopper.txt 2>&1
echo "bench-hopper rc=$?"; grep -A12 "^Summary" $OUT/bench_hopper.txt | head -14
stamp done
