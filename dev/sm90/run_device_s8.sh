#!/bin/bash
# Session 8's device call (s8-fwd): the library with 3 K/V stages at d64 (v8), trimmed to the
# benchmarked cells (sm90 forward, d64/128/256, bf16/fp16), plus the ctypes harness with variants
# 15 (d64 as v7b) and 16-19 (non-causal d128/d256 in clusters of 2 CTAs sharing K/V by TMA
# multicast); then the GPU test binary's sm90 forward tests, check.py on the library and on the
# clustered variants, compute-sanitizer (memcheck, racecheck, synccheck) on the new kernel shapes,
# the A/B (library vs variants vs cuDNN), and bench-hopper's grid
# (flashcore, cuDNN, CUTLASS example 88). Logs in /tmp/s8out, packed into $OUT/s8out.tgz after
# each step (a step cut by the time limit keeps the others).
cd "$(dirname "$0")/../.."
root=$PWD
DEVOUT=$OUT
OUT=/tmp/s8out
mkdir -p $OUT
save() { tar czf $DEVOUT/s8out.tgz -C /tmp s8out 2>/dev/null; }
export PYTHONUNBUFFERED=1
shopt -s nullglob
t0=$(date +%s)
stamp() { save; echo "--- $1 at +$(( $(date +%s) - t0 )) s"; }
[ -e .carry ] || ln -s ../.carry .carry
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader

stamp configure
cmake -S . -B build/s8 -G Ninja -DFLASHCORE_CUDA=ON -DFLASHCORE_CUDA_ARCHS=90-real -DFLASHCORE_KERNEL_FAMILIES=sm90 \
  -DFLASHCORE_PASSES=fwd "-DFLASHCORE_HEAD_DIMS=64;128;256" "-DFLASHCORE_DTYPES=bf16;fp16" -DFLASHCORE_BUILD_EXAMPLES=OFF \
  -DCUTLASS_DIR=$root/.carry/cutlass_include -DFLASHCORE_GTEST_SOURCE_DIR=$root/.carry/googletest > $OUT/configure.log 2>&1 \
  || { tail -20 $OUT/configure.log; exit 1; }
stamp build
source dev/sm90/flags.sh
CUTLASS_INC=$root/.carry/cutlass_include
NVCC_FLAGS="-gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr \
 -Xptxas=--warn-on-spills -Xptxas=-v -Xcompiler=-fPIC -I$root/src -I$root/include -I$CUTLASS_INC"
mkdir -p /tmp/s8obj
for f in dev/sm90/variants/s8_*.cu; do
  n=$(basename $f .cu)
  ( $NVCC $NVCC_FLAGS -I$root/dev/sm90 -c $f -o /tmp/s8obj/$n.o > /tmp/s8obj/$n.log 2>&1 || echo "variant $n FAILED" ) &
done
$NVCC $NVCC_FLAGS -I$root/dev/sm90 -DFC_SM90_VARIANTS -DFC_SM90_VARIANTS_6 -DFC_SM90_DIMS_64_128_256_ONLY \
  -c dev/sm90/capi.cu -o /tmp/s8obj/capi.o > /tmp/s8obj/capi.log 2>&1 &
cmake --build build/s8 -j 16 --target flashcore_gpu_tests flashcore_c flashcore_cli > $OUT/build.log 2>&1 \
  || { grep -E "error|FAILED" $OUT/build.log | head -30; }
wait
stamp built
grep -h "C7508\|C7517\|C751" $OUT/build.log /tmp/s8obj/*.log | sort | uniq -c | head
grep -h "spill stores" $OUT/build.log /tmp/s8obj/*.log | sort | uniq -c
mkdir -p $OUT/ptxas && cp /tmp/s8obj/*.log $OUT/ptxas/ && grep -A3 "fwd_kernel" $OUT/build.log | grep -E "Compiling|spill|Used" > $OUT/ptxas/library.txt
objs=$(find build/s8 -name 'fwd_sm90_*.o')
if [ $(ls /tmp/s8obj/s8_*.o 2>/dev/null | wc -l) -ne $(ls dev/sm90/variants/s8_*.cu | wc -l) ]; then
  echo "a variant failed to build: harness without variants"; cat /tmp/s8obj/s8_*.log | grep -m5 error
  $NVCC $NVCC_FLAGS -I$root/dev/sm90 -DFC_SM90_DIMS_64_128_256_ONLY -c dev/sm90/capi.cu -o /tmp/s8obj/capi.o
  rm -f /tmp/s8obj/s8_*.o
fi
$NVCC -gencode=arch=compute_90a,code=sm_90a -shared -o dev/sm90/libfc_sm90.so /tmp/s8obj/capi.o $objs /tmp/s8obj/s8_*.o \
  || echo "harness link FAILED"

stamp gpu-tests
FLASHCORE_KERNELS=sm90 timeout 100 build/s8/tests/gpu/flashcore_gpu_tests --gtest_filter='*CudaForward*' \
  > $OUT/gpu_tests_sm90.log 2>&1
echo "gpu tests (sm90, forward): rc=$? $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' $OUT/gpu_tests_sm90.log | tr '\n' ' ')"
grep -E "^\[  FAILED  \]" $OUT/gpu_tests_sm90.log | head -20

cd dev/sm90
stamp check
CHECK_DIMS=64,128,256 CHECK_NAME=check_s8.json timeout 150 python3 check.py > $OUT/check_s8.txt 2>&1
echo "check.py rc=$?"; grep "FAIL\|cases" $OUT/check_s8.txt | head -8
CHECK_DIMS=128,256 CHECK_CAUSAL=0 CHECK_VARIANTS="bf16:128:16,bf16:256:17,fp16:128:18,fp16:256:19" CHECK_NAME=check_s8_cluster.json \
  timeout 120 python3 check.py > $OUT/check_s8_cluster.txt 2>&1
echo "check.py clustered variants rc=$?"; grep "FAIL\|cases" $OUT/check_s8_cluster.txt | head -8

stamp sanitizer
S=compute-sanitizer; [ -x /usr/local/cuda/bin/compute-sanitizer ] && S=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck synccheck; do
  SAN_SHAPES=9,10,11,12,14 SAN_VARIANTS=128:16,256:17 timeout 90 $S --tool $tool --kernel-name kns=fwd_kernel --error-exitcode 7 python3 san.py \
    > $OUT/san_${tool}_s8.txt 2>&1
  echo "sanitizer $tool rc=$?: $(tail -1 $OUT/san_${tool}_s8.txt)"
done

stamp abbench
L=libfc_sm90.so
ROUNDS=1 ITERS=10 LATENCY=0 FC_LIB_A=$L FC_LIB_B=$L BENCH_NAME=abbench_s8.json \
  CELLS="bf16:256:0:1024,2048,4096,8192;fp16:256:0:2048,4096;bf16:128:0:2048,4096,8192;fp16:128:0:2048;bf16:64:1:2048,4096;bf16:64:0:2048,8192" \
  EXTRA="cl256=$L@17@256:0;cl256h=$L@19@256:0;cl128=$L@16@128:0;cl128h=$L@18@128:0;v7b64=$L@15@64:0,64:1" \
  timeout 120 python3 abbench.py 2>&1 | tee $OUT/abbench_s8.txt | grep -v "^$"
cd $root

stamp bench-hopper
FLASHCORE_LIBRARY=$root/build/s8/src/c_api/libflashcore_c.so timeout 260 bash scripts/bench.sh --hopper \
  --impls flashcore,sdpa_cudnn,cutlass_ex88 --no-memory --plots none --cli build/s8/tools/flashcore \
  --out-dir $OUT/bench --flat --budget-s 170 --commit "${COMMIT:-unknown}" > $OUT/bench_hopper.txt 2>&1
echo "bench-hopper rc=$?"; grep -A12 "^Summary" $OUT/bench_hopper.txt | head -14

stamp done
