#!/bin/bash
# NOT YET RUN. The next step of issue 14 (tuning log v10, next step 1a), one short device call: a
# harness of variants only (no library build; five TUs, about 70 s on the device) with
# FC_SM90_VARIANTS_10 + 11: the timeline of the library's non-causal 2k tiles with the library's
# epilogue (26/27) and with 16-byte O stores (29/30), their plain twins (28/20); s10_timeline.py
# says whether the per-tile epilogue (2.0 / 6.5 us in v10) shrinks and checks that 29/30's outputs
# are bit-identical to the plain kernels'; check.py through 29/30 (non-causal); compute-sanitizer
# memcheck on san.py's d128/d256 non-causal shapes through them.
# Logs in /tmp/s10b, packed into $OUT/s10b.tgz after each step.
cd "$(dirname "$0")/../.."
root=$PWD
DEVOUT=$OUT
OUT=/tmp/s10b
mkdir -p $OUT
save() { tar czf $DEVOUT/s10b.tgz -C /tmp s10b 2>/dev/null; }
export PYTHONUNBUFFERED=1
t0=$(date +%s)
stamp() { save; echo "--- $1 at +$(( $(date +%s) - t0 )) s"; }
[ -e .carry ] || ln -s ../.carry .carry
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
source dev/sm90/flags.sh
NVCC_FLAGS="-gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr \
 -Xptxas=--warn-on-spills -Xptxas=-v -Xcompiler=-fPIC -I$root/src -I$root/include -I$root/.carry/cutlass_include"
mkdir -p /tmp/s10bobj
for f in dev/sm90/variants/s9_d256_bf16.cu dev/sm90/variants/s9b_d256_n64.cu dev/sm90/variants/s10_timeline.cu \
         dev/sm90/variants/s10_d128_plain.cu dev/sm90/variants/s10_timeline_vec16.cu; do
  n=$(basename $f .cu)
  ( timeout 170 $NVCC $NVCC_FLAGS -I$root/dev/sm90 -c $f -o /tmp/s10bobj/$n.o > /tmp/s10bobj/$n.log 2>&1 || echo "variant $n FAILED" ) &
done
timeout 170 $NVCC $NVCC_FLAGS -I$root/dev/sm90 -DFC_SM90_VARIANTS -DFC_SM90_VARIANTS_10 -DFC_SM90_VARIANTS_11 \
  -DFC_SM90_VARIANTS_ONLY -c dev/sm90/capi.cu -o /tmp/s10bobj/capi.o > /tmp/s10bobj/capi.log 2>&1 &
wait
stamp built
mkdir -p $OUT/ptxas && cp /tmp/s10bobj/*.log $OUT/ptxas/
grep -h "C7508\|C7517\|C751" /tmp/s10bobj/*.log | sort | uniq -c | head
grep -h "spill stores" /tmp/s10bobj/*.log | sort | uniq -c
$NVCC -gencode=arch=compute_90a,code=sm_90a -shared -o dev/sm90/libfc_s10b.so /tmp/s10bobj/*.o || echo "harness link FAILED"
cd dev/sm90
export FC_LIB=libfc_s10b.so

stamp timeline
TIMELINE_CELLS=128:26:28,256:27:20,128:29:28,256:30:20 timeout 90 python3 s10_timeline.py 2>&1 | tee $OUT/s10b_timeline.txt

stamp correctness
S=compute-sanitizer; [ -x /usr/local/cuda/bin/compute-sanitizer ] && S=/usr/local/cuda/bin/compute-sanitizer
SAN_SHAPES=3,7,11,12,13,15 SAN_VARIANTS=128:29,256:30 timeout 60 $S --tool memcheck --kernel-name kns=fwd_kernel --error-exitcode 7 \
  python3 san.py > $OUT/san_memcheck_s10b.txt 2>&1 &
CHECK_DIMS=128,256 CHECK_DTYPES=bf16 CHECK_CAUSAL=0 CHECK_VARIANTS="bf16:128:29,bf16:256:30" CHECK_NAME=check_s10b.json \
  timeout 60 python3 check.py > $OUT/check_s10b.txt 2>&1 &
wait
grep "FAIL\|cases" $OUT/check_s10b.txt | cut -c1-300 | head -6
echo "sanitizer memcheck: $(tail -2 $OUT/san_memcheck_s10b.txt | tr '\n' ' ')"
cp $OUT/s10_timeline.json $OUT/check_s10b.json $DEVOUT/ 2>/dev/null
cd $root
stamp done
