#!/bin/bash
# Session 9's device call (s9-fwd), everything in one: the library trimmed to the benchmarked cells
# (sm90 forward, d64/128/256, bf16/fp16; its tiles unchanged) plus the ctypes harness with
# variants 20-23 (the next tile's Q prefetched into L2; d128 non-causal <= 4k keys also 3 stages
# and one Q buffer); SASS check of the prefetch; Nsight Compute on bf16 d256 and d128 non-causal
# 2k (library, variants, cuDNN); the A/B (library twice, variants, cuDNN); the wave-tail probe;
# issue 14's latency row (eager and graph replay, through the torch binding); then, correctness
# in parallel: check.py through the variants (causal too), compute-sanitizer memcheck / racecheck /
# synccheck on the variants' multi-tile shapes, the GPU test binary's sm90 forward tests.
# Logs in /tmp/s9out, packed into $OUT/s9out.tgz after each step.
cd "$(dirname "$0")/../.."
root=$PWD
DEVOUT=$OUT
OUT=/tmp/s9out
mkdir -p $OUT
save() { tar czf $DEVOUT/s9out.tgz -C /tmp s9out 2>/dev/null; }
export PYTHONUNBUFFERED=1
t0=$(date +%s)
stamp() { save; echo "--- $1 at +$(( $(date +%s) - t0 )) s"; }
[ -e .carry ] || ln -s ../.carry .carry
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader

stamp configure
cmake -S . -B build/s9 -G Ninja -DFLASHCORE_CUDA=ON -DFLASHCORE_CUDA_ARCHS=90-real -DFLASHCORE_KERNEL_FAMILIES=sm90 \
  -DFLASHCORE_PASSES=fwd "-DFLASHCORE_HEAD_DIMS=64;128;256" "-DFLASHCORE_DTYPES=bf16;fp16" -DFLASHCORE_BUILD_EXAMPLES=OFF \
  -DCUTLASS_DIR=$root/.carry/cutlass_include -DFLASHCORE_GTEST_SOURCE_DIR=$root/.carry/googletest > $OUT/configure.log 2>&1 \
  || { tail -20 $OUT/configure.log; exit 1; }
stamp build
source dev/sm90/flags.sh
NVCC_FLAGS="-gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr \
 -Xptxas=--warn-on-spills -Xptxas=-v -Xcompiler=-fPIC -I$root/src -I$root/include -I$root/.carry/cutlass_include"
mkdir -p /tmp/s9obj
for f in dev/sm90/variants/s9_*.cu; do
  n=$(basename $f .cu)
  ( $NVCC $NVCC_FLAGS -I$root/dev/sm90 -c $f -o /tmp/s9obj/$n.o > /tmp/s9obj/$n.log 2>&1 || echo "variant $n FAILED" ) &
done
$NVCC $NVCC_FLAGS -I$root/dev/sm90 -DFC_SM90_VARIANTS -DFC_SM90_VARIANTS_7 -DFC_SM90_DIMS_64_128_256_ONLY \
  -c dev/sm90/capi.cu -o /tmp/s9obj/capi.o > /tmp/s9obj/capi.log 2>&1 &
cmake --build build/s9 -j 16 --target flashcore_gpu_tests flashcore_c flashcore_cli > $OUT/build.log 2>&1 \
  || { grep -E "error|FAILED" $OUT/build.log | head -30; }
wait
stamp built
grep -h "C7508\|C7517\|C751" $OUT/build.log /tmp/s9obj/*.log | sort | uniq -c | head
grep -h "spill stores" $OUT/build.log /tmp/s9obj/*.log | sort | uniq -c
mkdir -p $OUT/ptxas && cp /tmp/s9obj/*.log $OUT/ptxas/
objs=$(find build/s9 -name 'fwd_sm90_*.o')
$NVCC -gencode=arch=compute_90a,code=sm_90a -shared -o dev/sm90/libfc_sm90.so /tmp/s9obj/capi.o $objs /tmp/s9obj/s9_*.o \
  || echo "harness link FAILED"
for o in /tmp/s9obj/s9_d256_bf16.o /tmp/s9obj/s9_d128_bf16.o; do
  echo "SASS $(basename $o): UTMAPF (TMA prefetch) $(cuobjdump -sass $o | grep -c UTMAPF), UTMALDG $(cuobjdump -sass $o | grep -c UTMALDG), LDL/STL $(cuobjdump -sass $o | grep -cE 'LDL|STL')"
done
L=libfc_sm90.so
cd dev/sm90

stamp ncu
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
PROBE_VARIANTS="bf16:256:20,bf16:128:22" timeout 80 $NCU --clock-control none --kernel-name regex:"fwd_kernel|sdpa|fprop|flash|fmha|attn|cudnn" --launch-count 8 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SchedulerStats \
  --section WarpStateStats --section LaunchStats --section Occupancy \
  --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min \
  -o $OUT/s9_profile --force-overwrite python3 s9_probe.py ncu > $OUT/ncu_run.txt 2>&1
echo "ncu rc=$?"; grep "ncu cell\|ERR" $OUT/ncu_run.txt | head
$NCU --import $OUT/s9_profile.ncu-rep --page details > $OUT/ncu_details.txt 2>&1
$NCU --import $OUT/s9_profile.ncu-rep --page raw --csv > $OUT/ncu_raw.csv 2>&1
grep -E "^  [a-z_]*fwd_kernel|^  [a-z].*(sdpa|fprop|flash|cudnn)|Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Hit Rate|Registers Per|Grid Size|Block Size|Dynamic Shared|Issued Ipc|No Eligible|gmma" $OUT/ncu_details.txt | head -80

stamp abbench
ROUNDS=1 ITERS=10 LATENCY=0 FC_LIB_A=$L FC_LIB_B=$L BENCH_NAME=abbench_s9.json \
  CELLS="bf16:256:0:2048,4096,8192;fp16:256:0:2048,4096;bf16:256:1:2048,4096;fp16:256:1:2048;bf16:128:0:2048,4096;fp16:128:0:2048;bf16:128:1:2048,4096" \
  EXTRA="pf256=$L@20@256:0,256:1;pf256h=$L@21@256:0,256:1;pf128=$L@22@128:0,128:1;pf128h=$L@23@128:0,128:1" \
  timeout 80 python3 abbench.py 2>&1 | tee $OUT/abbench_s9.txt | grep -v "^$"

stamp correctness
S=compute-sanitizer; [ -x /usr/local/cuda/bin/compute-sanitizer ] && S=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck synccheck; do
  SAN_SHAPES=11,12,15,16 SAN_VARIANTS=128:22,256:20 SAN_VARIANTS_CAUSAL=1 timeout 80 $S --tool $tool \
    --kernel-name kns=fwd_kernel --error-exitcode 7 python3 san.py > $OUT/san_${tool}_s9.txt 2>&1 &
done
CHECK_DIMS=128,256 CHECK_VARIANTS="bf16:128:22,bf16:256:20,fp16:128:23,fp16:256:21" CHECK_VARIANTS_CAUSAL=1 \
  CHECK_NAME=check_s9.json timeout 80 python3 check.py > $OUT/check_s9.txt 2>&1 &
FLASHCORE_KERNELS=sm90 timeout 80 $root/build/s9/tests/gpu/flashcore_gpu_tests --gtest_filter='*CudaForward*' \
  > $OUT/gpu_tests_sm90.log 2>&1 &
wait
grep "FAIL\|cases" $OUT/check_s9.txt | head -8
for tool in memcheck racecheck synccheck; do echo "sanitizer $tool: $(tail -2 $OUT/san_${tool}_s9.txt | tr '\n' ' ')"; done
echo "gpu tests (sm90, forward): $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' $OUT/gpu_tests_sm90.log | tr '\n' ' ')"
cd $root
stamp latency
FLASHCORE_LIBRARY=$root/build/s9/src/c_api/libflashcore_c.so timeout 50 bash scripts/bench.sh --hopper --no-sweep \
  --no-memory --impls flashcore,flashcore_sm90,sdpa_cudnn,sdpa_flash --latency-runs 300 --plots none \
  --cli build/s9/tools/flashcore --out-dir $OUT/bench --flat --commit "${COMMIT:-unknown}" > $OUT/latency.txt 2>&1
echo "latency rc=$?"; grep -iE "latency|p50|eager|graph" $OUT/latency.txt | head -20

cd dev/sm90
stamp waves
PROBE_VARIANTS="bf16:256:20,bf16:128:22,fp16:256:21" timeout 40 python3 s9_probe.py waves 2>&1 | tee $OUT/waves_s9.txt

cd $root
stamp done
