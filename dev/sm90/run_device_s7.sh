#!/bin/bash
# Session 7's single device call (v7): build the library trimmed to the benchmarked cells (sm90
# forward, d64/128/256, bf16/fp16) and, from its objects plus the v7 variant TUs, the ctypes
# harness library; then check (GPU test binary's sm90 forward tests, check.py on the library and
# on the new variants), the variant A/B, compute-sanitizer memcheck/racecheck on san.py's shapes,
# and bench-hopper's grid (flashcore, cuDNN, CUTLASS example 88). Run from the repository root
# with .carry beside it. Every log lands in /tmp/s7out, re-packed into $OUT/s7out.tgz after each
# step (the device returns at most 8 files, and a step cut by the time limit keeps the others).
cd "$(dirname "$0")/../.."
root=$PWD
DEVOUT=$OUT
OUT=/tmp/s7out
mkdir -p $OUT
save() { tar czf $DEVOUT/s7out.tgz -C /tmp s7out 2>/dev/null; }
export PYTHONUNBUFFERED=1
shopt -s nullglob
t0=$(date +%s)
stamp() { save; echo "--- $1 at +$(( $(date +%s) - t0 )) s"; }
[ -e .carry ] || ln -s ../.carry .carry
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader

stamp configure
cmake -S . -B build/s7 -G Ninja -DFLASHCORE_CUDA=ON -DFLASHCORE_CUDA_ARCHS=90-real -DFLASHCORE_KERNEL_FAMILIES=sm90 \
  -DFLASHCORE_PASSES=fwd "-DFLASHCORE_HEAD_DIMS=64;128;256" "-DFLASHCORE_DTYPES=bf16;fp16" -DFLASHCORE_BUILD_EXAMPLES=OFF \
  -DCUTLASS_DIR=$root/.carry/cutlass_include -DFLASHCORE_GTEST_SOURCE_DIR=$root/.carry/googletest > $OUT/configure.log 2>&1 \
  || { tail -20 $OUT/configure.log; exit 1; }
stamp build
# The variant TUs compile beside the library (16 cores).
source dev/sm90/flags.sh
CUTLASS_INC=$root/.carry/cutlass_include
NVCC_FLAGS="-gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr \
 -Xptxas=--warn-on-spills -Xptxas=-v -Xcompiler=-fPIC -I$root/src -I$root/include -I$CUTLASS_INC"
mkdir -p /tmp/v7obj
for f in dev/sm90/variants/v7_*.cu; do
  n=$(basename $f .cu)
  ( $NVCC $NVCC_FLAGS -I$root/dev/sm90 -c $f -o /tmp/v7obj/$n.o > /tmp/v7obj/$n.log 2>&1 || echo "variant $n FAILED" ) &
done
$NVCC $NVCC_FLAGS -I$root/dev/sm90 -DFC_SM90_VARIANTS -DFC_SM90_VARIANTS_5 -DFC_SM90_DIMS_64_128_256_ONLY \
  -c dev/sm90/capi.cu -o /tmp/v7obj/capi.o > /tmp/v7obj/capi.log 2>&1 &
cmake --build build/s7 -j 16 --target flashcore_gpu_tests flashcore_c flashcore_cli > $OUT/build.log 2>&1 \
  || { grep -E "error|FAILED" $OUT/build.log | head -30; }
wait
stamp built
grep -h "C7508\|C7517" $OUT/build.log /tmp/v7obj/*.log | sort | uniq -c | head
grep -h "spill stores" $OUT/build.log /tmp/v7obj/*.log | sort | uniq -c
cat /tmp/v7obj/*.log | grep -B3 "[1-9][0-9]* bytes spill" | grep "Compiling entry" | head
mkdir -p $OUT/ptxas && cp /tmp/v7obj/*.log $OUT/ptxas/ && grep -A3 "fwd_kernel" $OUT/build.log | grep -E "Compiling|spill|Used" > $OUT/ptxas/library.txt
objs=$(find build/s7 -name 'fwd_sm90_*.o')
if [ $(ls /tmp/v7obj/v7_*.o 2>/dev/null | wc -l) -ne $(ls dev/sm90/variants/v7_*.cu | wc -l) ]; then
  echo "a variant failed to build: harness without variants"; cat /tmp/v7obj/v7_*.log | grep -m5 error
  $NVCC $NVCC_FLAGS -I$root/dev/sm90 -DFC_SM90_DIMS_64_128_256_ONLY -c dev/sm90/capi.cu -o /tmp/v7obj/capi.o
  rm -f /tmp/v7obj/v7_*.o
fi
$NVCC -gencode=arch=compute_90a,code=sm_90a -shared -o dev/sm90/libfc_sm90.so /tmp/v7obj/capi.o $objs /tmp/v7obj/v7_*.o \
  || echo "harness link FAILED"

stamp gpu-tests
FLASHCORE_KERNELS=sm90 timeout 100 build/s7/tests/gpu/flashcore_gpu_tests --gtest_filter='*CudaForward*:*KernelFamily*' \
  > $OUT/gpu_tests_sm90.log 2>&1
echo "gpu tests (sm90, forward): rc=$? $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' $OUT/gpu_tests_sm90.log | tr '\n' ' ')"
grep -E "^\[  FAILED  \]" $OUT/gpu_tests_sm90.log | head -20

cd dev/sm90
stamp check
CHECK_DIMS=64,128,256 CHECK_NAME=check_v7.json timeout 150 python3 check.py > $OUT/check_v7.txt 2>&1
echo "check.py rc=$?"; grep "FAIL\|cases" $OUT/check_v7.txt | head -8
for v in 12 13 14; do
  VARIANT=$v CHECK_DIMS=64 CHECK_DTYPES=bf16 CHECK_NAME=check_v7_variant$v.json timeout 60 python3 check.py --quick \
    > $OUT/check_v7_variant$v.txt 2>&1
  echo "check.py variant $v rc=$?: $(grep 'cases' $OUT/check_v7_variant$v.txt | head -2)"
done

stamp abbench
L=libfc_sm90.so
ROUNDS=1 ITERS=20 LATENCY=0 FC_LIB_A=$L FC_LIB_B=$L BENCH_NAME=abbench_v7_bf16.json \
  CELLS="bf16:64:1:1024,2048,4096,8192;bf16:64:0:2048,4096,8192" \
  EXTRA="v6b=$L@10@64:0,64:1;exp4=$L@12@64:0,64:1;t128=$L@13@64:1;st3=$L@14@64:0,64:1" \
  timeout 90 python3 abbench.py 2>&1 | tee $OUT/abbench_v7_bf16.txt | grep -v "^$"
ROUNDS=1 ITERS=20 LATENCY=0 FC_LIB_A=$L FC_LIB_B=$L BENCH_NAME=abbench_v7_fp16.json \
  CELLS="fp16:64:1:2048,4096,8192;fp16:64:0:2048,4096" EXTRA="v6b=$L@11@64:0,64:1" \
  timeout 60 python3 abbench.py 2>&1 | tee $OUT/abbench_v7_fp16.txt | grep -v "^$"

stamp sanitizer
S=compute-sanitizer; [ -x /usr/local/cuda/bin/compute-sanitizer ] && S=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck; do
  SAN_SKIP_DIMS=96,192 timeout 45 $S --tool $tool --kernel-name kns=fwd_kernel --error-exitcode 7 python3 san.py \
    > $OUT/san_${tool}_v7.txt 2>&1
  echo "sanitizer $tool rc=$?: $(tail -1 $OUT/san_${tool}_v7.txt)"
done
cd $root
stamp bench-hopper
cd $root
FLASHCORE_LIBRARY=$root/build/s7/src/c_api/libflashcore_c.so timeout 260 bash scripts/bench.sh --hopper \
  --impls flashcore,sdpa_cudnn,cutlass_ex88 --no-memory --plots none --cli build/s7/tools/flashcore \
  --out-dir $OUT/bench --flat --budget-s 170 --commit "${COMMIT:-unknown}" > $OUT/bench_hopper.txt 2>&1
echo "bench-hopper rc=$?"; grep -A12 "^Summary" $OUT/bench_hopper.txt | head -14

stamp done
