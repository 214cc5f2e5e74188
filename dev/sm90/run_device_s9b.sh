#!/bin/bash
# Session 9's second device call (s9-fwd), short: a harness of three dev variants only (no library
# build): bf16 d256 as shipped before s9 (24), with the next Q prefetched into L2 (20, what ships
# after s9), and with 64-key blocks (25); SASS check of the prefetch; the A/B with the order rotated
# every round (s9_ab.py); check.py and compute-sanitizer on variant 25 (a new tile shape).
# Logs in /tmp/s9b, packed into $OUT/s9b.tgz after each step.
cd "$(dirname "$0")/../.."
root=$PWD
DEVOUT=$OUT
OUT=/tmp/s9b
mkdir -p $OUT
save() { tar czf $DEVOUT/s9b.tgz -C /tmp s9b 2>/dev/null; }
export PYTHONUNBUFFERED=1
t0=$(date +%s)
stamp() { save; echo "--- $1 at +$(( $(date +%s) - t0 )) s"; }
[ -e .carry ] || ln -s ../.carry .carry
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
source dev/sm90/flags.sh
NVCC_FLAGS="-gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr \
 -Xptxas=--warn-on-spills -Xptxas=-v -Xcompiler=-fPIC -I$root/src -I$root/include -I$root/.carry/cutlass_include"
mkdir -p /tmp/s9bobj
for f in dev/sm90/variants/s9_d256_bf16.cu dev/sm90/variants/s9b_d256_base.cu dev/sm90/variants/s9b_d256_n64.cu; do
  n=$(basename $f .cu)
  ( timeout 150 $NVCC $NVCC_FLAGS -I$root/dev/sm90 -c $f -o /tmp/s9bobj/$n.o > /tmp/s9bobj/$n.log 2>&1 || echo "variant $n FAILED" ) &
done
timeout 150 $NVCC $NVCC_FLAGS -I$root/dev/sm90 -DFC_SM90_VARIANTS -DFC_SM90_VARIANTS_8 -DFC_SM90_VARIANTS_ONLY \
  -c dev/sm90/capi.cu -o /tmp/s9bobj/capi.o > /tmp/s9bobj/capi.log 2>&1 &
wait
stamp built
cp /tmp/s9bobj/*.log $OUT/
grep -h "C7508\|C7517\|C751" /tmp/s9bobj/*.log | sort | uniq -c | head
grep -h "spill stores" /tmp/s9bobj/*.log | sort | uniq -c
$NVCC -gencode=arch=compute_90a,code=sm_90a -shared -o dev/sm90/libfc_s9b.so /tmp/s9bobj/*.o || echo "harness link FAILED"
for o in /tmp/s9bobj/s9_d256_bf16.o /tmp/s9bobj/s9b_d256_base.o; do
  echo "SASS $(basename $o): UTMAPF (TMA prefetch) $(cuobjdump -sass $o | grep -c UTMAPF), UTMALDG $(cuobjdump -sass $o | grep -c UTMALDG), LDL/STL $(cuobjdump -sass $o | grep -cE 'LDL|STL')"
done
cd dev/sm90
export FC_LIB=libfc_s9b.so

stamp ab
AB_VARIANTS=24,20,25 ROUNDS=4 ITERS=10 CELLS="bf16:256:0:2048,4096,8192;bf16:256:1:2048,4096" \
  timeout 60 python3 s9_ab.py 2>&1 | tee $OUT/s9_ab.txt

stamp correctness
S=compute-sanitizer; [ -x /usr/local/cuda/bin/compute-sanitizer ] && S=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck synccheck; do
  SAN_SHAPES=4,12,13,15 SAN_VARIANTS=256:25 SAN_VARIANTS_CAUSAL=1 timeout 40 $S --tool $tool \
    --kernel-name kns=fwd_kernel --error-exitcode 7 python3 san.py > $OUT/san_${tool}_s9b.txt 2>&1 &
done
CHECK_DIMS=256 CHECK_DTYPES=bf16 CHECK_VARIANTS="bf16:256:25" CHECK_VARIANTS_CAUSAL=1 CHECK_NAME=check_s9b.json \
  timeout 40 python3 check.py > $OUT/check_s9b.txt 2>&1 &
wait
grep "FAIL\|cases" $OUT/check_s9b.txt | cut -c1-300 | head -6
for tool in memcheck racecheck synccheck; do echo "sanitizer $tool: $(tail -2 $OUT/san_${tool}_s9b.txt | tr '\n' ' ')"; done
stamp done
