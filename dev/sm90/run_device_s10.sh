#!/bin/bash
# Session 9 round 2 (s9-fwd2, issue 14), one device call:
#  build  the library trimmed to sm90 / forward / d256 / bf16+fp16 (with the shape rule: the 64-key
#         tile for d256 causal up to 2k keys) and its GPU tests; beside it a ctypes harness of the
#         library's d256 TUs + variants 20 (the main d256 tile), 25 (64-key blocks), 26/27 (the
#         d128/d256 non-causal 2k tiles with %globaltimer stamps), 28 (d128's plain twin)
#  (1)    s10_timeline.py: where a launch's idle SM time goes, bf16 d128 and d256 non-causal 2k
#  (2)    s9_ab.py, order rotated every round: v20 vs v25 vs the library (v-1) vs cuDNN on causal
#         512-4k and non-causal 2k
#  (3)    correctness of the rule: check.py through the library's d256 (bf16, fp16) and the GPU
#         test binary's d256 forward tests under FLASHCORE_KERNELS=sm90, in parallel
# Logs in /tmp/s10, packed into $OUT/s10.tgz after each step.
cd "$(dirname "$0")/../.."
root=$PWD
DEVOUT=$OUT
OUT=/tmp/s10
mkdir -p $OUT
save() { tar czf $DEVOUT/s10.tgz -C /tmp s10 2>/dev/null; }
export PYTHONUNBUFFERED=1
t0=$(date +%s)
stamp() { save; echo "--- $1 at +$(( $(date +%s) - t0 )) s"; }
[ -e .carry ] || ln -s ../.carry .carry
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
cmake -S . -B build/s10 -G Ninja -DFLASHCORE_CUDA=ON -DFLASHCORE_CUDA_ARCHS=90-real -DFLASHCORE_KERNEL_FAMILIES=sm90 \
  -DFLASHCORE_PASSES=fwd -DFLASHCORE_HEAD_DIMS=256 "-DFLASHCORE_DTYPES=bf16;fp16" -DFLASHCORE_BUILD_EXAMPLES=OFF \
  -DCUTLASS_DIR=$root/.carry/cutlass_include -DFLASHCORE_GTEST_SOURCE_DIR=$root/.carry/googletest > $OUT/configure.log 2>&1 \
  || { tail -20 $OUT/configure.log; exit 1; }
source dev/sm90/flags.sh
NVCC_FLAGS="-gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr \
 -Xptxas=--warn-on-spills -Xptxas=-v -Xcompiler=-fPIC -I$root/src -I$root/include -I$root/.carry/cutlass_include"
mkdir -p /tmp/s10obj
for f in dev/sm90/variants/s9_d256_bf16.cu dev/sm90/variants/s9b_d256_n64.cu dev/sm90/variants/s10_timeline.cu \
         dev/sm90/variants/s10_d128_plain.cu; do
  n=$(basename $f .cu)
  ( timeout 170 $NVCC $NVCC_FLAGS -I$root/dev/sm90 -c $f -o /tmp/s10obj/$n.o > /tmp/s10obj/$n.log 2>&1 || echo "variant $n FAILED" ) &
done
timeout 170 $NVCC $NVCC_FLAGS -I$root/dev/sm90 -DFC_SM90_VARIANTS -DFC_SM90_VARIANTS_10 -DFC_SM90_D256_ONLY \
  -c dev/sm90/capi.cu -o /tmp/s10obj/capi.o > /tmp/s10obj/capi.log 2>&1 &
timeout 170 cmake --build build/s10 -j 16 --target flashcore_gpu_tests > $OUT/build.log 2>&1 \
  || { grep -E "error|FAILED" $OUT/build.log | head -30; }
wait
stamp built
mkdir -p $OUT/ptxas && cp /tmp/s10obj/*.log $OUT/ptxas/
grep -h "C7508\|C7517\|C751" $OUT/build.log /tmp/s10obj/*.log | sort | uniq -c | head
grep -h "spill stores" $OUT/build.log /tmp/s10obj/*.log | sort | uniq -c
objs=$(find build/s10 -name 'fwd_sm90_*hdim256*.o')
$NVCC -gencode=arch=compute_90a,code=sm_90a -shared -o dev/sm90/libfc_s10.so /tmp/s10obj/*.o $objs || echo "harness link FAILED"
cd dev/sm90
export FC_LIB=libfc_s10.so

stamp timeline
timeout 60 python3 s10_timeline.py 2>&1 | tee $OUT/s10_timeline.txt

stamp ab
AB_VARIANTS=20,25,-1 ROUNDS=6 ITERS=10 BENCH_NAME=s10_ab.json CELLS="bf16:256:1:512,1024,2048,4096;bf16:256:0:2048" \
  timeout 70 python3 s9_ab.py 2>&1 | tee $OUT/s10_ab.txt

stamp correctness
CHECK_DIMS=256 CHECK_NAME=check_s10.json timeout 60 python3 check.py > $OUT/check_s10.txt 2>&1 &
FLASHCORE_KERNELS=sm90 timeout 60 $root/build/s10/tests/gpu/flashcore_gpu_tests --gtest_filter='*CudaForward*d256*' \
  > $OUT/gpu_tests_s10.log 2>&1 &
wait
grep "FAIL\|cases" $OUT/check_s10.txt | cut -c1-300 | head -6
echo "gpu tests (sm90, forward d256): $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]|FAILED  \] ' $OUT/gpu_tests_s10.log | tr '\n' ' ')"
cp $OUT/s10_timeline.json $OUT/s10_ab.json $OUT/check_s10.json $DEVOUT/ 2>/dev/null
cd $root
stamp done
