#!/bin/bash
# The one device runner of dev/sm90 (replaces the per-session run_device*.sh scripts; the tuning log
# still names them as history). One `run` call = one invocation: what to build and which steps to
# run are arguments, each step's knobs the environment variables its Python script already reads.
#
#   bash dev/sm90/run_device.sh [options] STEP...
#
# Options (what `build` builds; both parts in parallel, on all cores):
#   --name N            logs in /tmp/N, packed into $OUT/N.tgz after every step (default: dev)
#   --lib DIMS:DTYPES[:FAMILIES[:PASSES]]
#                       the library, trimmed with CMake into build/N, e.g. "128;256:bf16:sm90:fwd"
#                       (targets flashcore_gpu_tests, flashcore_c, flashcore_cli); its sm90 forward
#                       objects are linked into the harness
#   --variants "F..."   dev variant TUs (dev/sm90/variants/F.cu) for the harness
#   --groups "N..."     FC_SM90_VARIANTS_N groups compiled into capi.cu's run_variant switch
#   --keep-logs         copy every harness TU's ptxas log into the tarball (ptxas/)
# Steps (in the order given):
#   build      configure + build; ptxas summary (C7508/C7517, spills) of the library and harness
#   sass       UTMALDG/UTMAST/HGMMA/LDL-STL counts of every harness object (cuobjdump)
#   timeline   s10_timeline.py      (TIMELINE_CELLS)
#   ab         s9_ab.py             (AB_VARIANTS, CELLS, ROUNDS, ITERS, BENCH_NAME)
#   check      check.py             (CHECK_DIMS, CHECK_DTYPES, CHECK_CAUSAL, CHECK_VARIANTS, CHECK_NAME)
#   gputests   the GPU test binary  (GTEST_FILTER, FLASHCORE_KERNELS; needs --lib)
#   sanitize   compute-sanitizer memcheck, racecheck, synccheck over san.py (SAN_SHAPES, SAN_VARIANTS, ...)
#   correct    check + gputests + sanitize at the same time (they share the GPU; each is small)
#   latency    issue 14's B=1 H=8 S=512 D=64 latency row through scripts/bench.sh --hopper (needs --lib)
#   grid       a trimmed scripts/bench.sh --hopper sweep, cold L2 (GRID_DTYPES, GRID_SEQLENS, GRID_IMPLS,
#              GRID_DIMS; GQA rows where their seqlens are in GRID_SEQLENS; needs --lib); cutlass_ex88
#              from .carry/ex88 (fp16, MHA only: its other cells are blank with the reason)
# STEP_TIMEOUT (default 90 s) bounds every step (SAN_TIMEOUT each sanitizer, if set).
# Without `build`, the steps use what is already at build/N and dev/sm90/libfc_N.so: built on the
# 2-core machine with the same commands (nvcc 13.0, sm_90a SASS) and carried, no device time goes to
# compiling (session 11: the harness linked by hand there, see the tuning log's v13 command).
#
# Example (session 10, issue 14's epilogue):
#   bash dev/sm90/run_device.sh --name s10fwd --lib "128;256:bf16:sm90:fwd" \
#     --variants "s9_d256_bf16 s10_d128_plain s10_timeline" --groups "10" build timeline ab correct
cd "$(dirname "$0")/../.."
root=$PWD
DEVOUT=${OUT:-/tmp}
NAME=dev LIB="" VARIANTS="" VGROUPS="" KEEP_LOGS=0
while [ $# -gt 0 ]; do
  case $1 in
    --name) NAME=$2; shift 2 ;;
    --lib) LIB=$2; shift 2 ;;
    --variants) VARIANTS=$2; shift 2 ;;
    --groups) VGROUPS=$2; shift 2 ;;
    --keep-logs) KEEP_LOGS=1; shift ;;
    --*) echo "unknown option $1"; exit 2 ;;
    *) break ;;
  esac
done
LOG=/tmp/$NAME
OBJ=/tmp/$NAME-obj
BUILD=build/$NAME
mkdir -p $LOG $OBJ
export OUT=$LOG PYTHONUNBUFFERED=1
T=${STEP_TIMEOUT:-90}
t0=$(date +%s)
save() { tar czf $DEVOUT/$NAME.tgz -C /tmp $NAME 2>/dev/null; }
stamp() { save; echo "--- $1 at +$(( $(date +%s) - t0 )) s"; }
[ -e .carry ] || ln -s ../.carry .carry
S=compute-sanitizer; [ -x /usr/local/cuda/bin/compute-sanitizer ] && S=/usr/local/cuda/bin/compute-sanitizer
NVCC=/usr/local/cuda/bin/nvcc
NVCC_FLAGS="-gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr \
 -Xptxas=--warn-on-spills -Xptxas=-v -Xcompiler=-fPIC -I$root/src -I$root/include -I$root/.carry/cutlass_include"
HARNESS=dev/sm90/libfc_$NAME.so
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader

# capi.cu's defines: the variant groups, and which of the library's (dtype, head dim) kernels exist.
capi_defines() {
  local d=""
  [ -n "$VARIANTS$VGROUPS" ] && d="-DFC_SM90_VARIANTS"
  for g in $VGROUPS; do d="$d -DFC_SM90_VARIANTS_$g"; done
  if [ -z "$LIB" ]; then
    d="$d -DFC_SM90_VARIANTS_ONLY"
  else
    IFS=: read -r dims dtypes _ <<< "$LIB"
    d="$d -DFC_SM90_LIB_SUBSET"
    for x in ${dims//;/ }; do d="$d -DFC_SM90_LIB_D$x"; done
    for x in ${dtypes//;/ }; do d="$d -DFC_SM90_LIB_${x^^}"; done
  fi
  echo "$d"
}

step_build() {
  if [ -n "$LIB" ]; then
    IFS=: read -r dims dtypes families passes <<< "$LIB"
    cmake -S . -B $BUILD -G Ninja -DFLASHCORE_CUDA=ON -DFLASHCORE_CUDA_ARCHS=90-real \
      "-DFLASHCORE_KERNEL_FAMILIES=${families:-sm90}" "-DFLASHCORE_PASSES=${passes:-fwd}" "-DFLASHCORE_HEAD_DIMS=$dims" \
      "-DFLASHCORE_DTYPES=$dtypes" -DFLASHCORE_BUILD_EXAMPLES=OFF -DCUTLASS_DIR=$root/.carry/cutlass_include \
      -DFLASHCORE_GTEST_SOURCE_DIR=$root/.carry/googletest > $LOG/configure.log 2>&1 \
      || { tail -20 $LOG/configure.log; return 1; }
  fi
  for v in $VARIANTS; do
    ( timeout 250 $NVCC $NVCC_FLAGS -I$root/dev/sm90 -c dev/sm90/variants/$v.cu -o $OBJ/$v.o > $OBJ/$v.log 2>&1 \
      || { echo "variant $v FAILED"; grep -m5 error $OBJ/$v.log; } ) &
  done
  if [ -n "$VARIANTS$VGROUPS$LIB" ]; then
    ( timeout 250 $NVCC $NVCC_FLAGS -I$root/dev/sm90 $(capi_defines) -c dev/sm90/capi.cu -o $OBJ/capi.o \
      > $OBJ/capi.log 2>&1 || { echo "capi FAILED"; grep -m5 error $OBJ/capi.log; } ) &
  fi
  if [ -n "$LIB" ]; then
    timeout 250 cmake --build $BUILD -j 16 --target flashcore_gpu_tests flashcore_c flashcore_cli > $LOG/build.log 2>&1 \
      || { echo "library build FAILED"; grep -E "error|FAILED" $LOG/build.log | head -20; }
  fi
  wait
  mkdir -p $LOG/ptxas
  [ $KEEP_LOGS = 1 ] && cp $OBJ/*.log $LOG/ptxas/ 2>/dev/null
  echo "ptxas C7508/C7517 (library + harness):"
  grep -h "C7508\|C7517" $LOG/build.log $OBJ/*.log 2>/dev/null | sort | uniq -c | head
  echo "ptxas spill stores (library + harness):"
  grep -h "spill stores" $LOG/build.log $OBJ/*.log 2>/dev/null | sort | uniq -c
  grep -h -B2 "spill stores" $LOG/build.log $OBJ/*.log 2>/dev/null | grep -v " 0 bytes spill" | grep -E "spill|Compiling" | head -20 \
    > $LOG/ptxas/spills_nonzero.txt
  if [ -e $OBJ/capi.o ]; then
    local objs=""
    [ -n "$LIB" ] && objs=$(find $BUILD -name 'fwd_sm90_*.o')
    local vobjs=""
    for v in $VARIANTS; do vobjs="$vobjs $OBJ/$v.o"; done
    $NVCC -gencode=arch=compute_90a,code=sm_90a -shared -o $HARNESS $OBJ/capi.o $vobjs $objs || echo "harness link FAILED"
  fi
}

step_sass() {
  for o in $OBJ/*.o $(find $BUILD -name "fwd_sm90_*.o" 2>/dev/null); do
    local s; s=$(/usr/local/cuda/bin/cuobjdump -sass $o 2>/dev/null || cuobjdump -sass $o 2>/dev/null)
    echo "SASS $(basename $o): UTMALDG $(grep -c UTMALDG <<< "$s") UTMASTG $(grep -c UTMASTG <<< "$s")" \
         "UTMAPF $(grep -c UTMAPF <<< "$s") HGMMA $(grep -c HGMMA <<< "$s") LDL/STL $(grep -cE 'LDL|STL' <<< "$s")"
  done
}

step_timeline() { (cd dev/sm90 && FC_LIB=$(basename $HARNESS) timeout $T python3 s10_timeline.py 2>&1 | tee $LOG/timeline.txt); }
step_ab() { (cd dev/sm90 && FC_LIB=$(basename $HARNESS) timeout $T python3 s9_ab.py 2>&1 | tee $LOG/ab.txt); }

step_check() {
  (cd dev/sm90 && FC_LIB=$(basename $HARNESS) timeout $T python3 check.py > $LOG/check.txt 2>&1)
  grep "FAIL\|cases" $LOG/check.txt | cut -c1-300 | head -6
}
step_gputests() {
  FLASHCORE_KERNELS=${FLASHCORE_KERNELS:-sm90} timeout $T $BUILD/tests/gpu/flashcore_gpu_tests \
    --gtest_filter="${GTEST_FILTER:-*CudaForward*}" > $LOG/gpu_tests.log 2>&1
  echo "gpu tests (FLASHCORE_KERNELS=${FLASHCORE_KERNELS:-sm90}, ${GTEST_FILTER:-*CudaForward*}):" \
       "$(grep -E '^\[  PASSED  \]|^\[  FAILED  \]|^\[  SKIPPED \] [0-9]' $LOG/gpu_tests.log | tr '\n' ' ')"
}
step_sanitize() {
  for tool in ${SAN_TOOLS:-memcheck racecheck synccheck}; do
    (cd dev/sm90 && FC_LIB=$(basename $HARNESS) timeout ${SAN_TIMEOUT:-$T} $S --tool $tool --kernel-name kns=fwd_kernel --error-exitcode 7 \
      python3 san.py > $LOG/san_$tool.txt 2>&1; echo "sanitizer $tool rc=$?: $(tail -2 $LOG/san_$tool.txt | tr '\n' ' ')") &
  done
  wait
}
step_correct() {
  step_check &
  [ -n "$LIB" ] && step_gputests &
  step_sanitize &
  wait
}
step_latency() {
  FLASHCORE_LIBRARY=$root/$BUILD/src/c_api/libflashcore_c.so timeout $T bash scripts/bench.sh --hopper --no-sweep \
    --no-memory --impls flashcore,flashcore_sm90,sdpa_cudnn,sdpa_flash --latency-runs 300 --plots none \
    --cli $BUILD/tools/flashcore --out-dir $LOG/bench --flat --commit "${COMMIT:-unknown}" > $LOG/latency.txt 2>&1
  echo "latency rc=$?"; grep -iE "latency|p50|eager|graph" $LOG/latency.txt | head -20
}

step_grid() {
  FLASHCORE_LIBRARY=$root/$BUILD/src/c_api/libflashcore_c.so timeout ${GRID_TIMEOUT:-$T} bash scripts/bench.sh --hopper \
    --no-latency --no-memory --impls "${GRID_IMPLS:-flashcore,sdpa_cudnn,cutlass_ex88}" --dtypes "${GRID_DTYPES:-fp16}" \
    --head-dims "${GRID_DIMS:-64,128,256}" --seqlens "${GRID_SEQLENS:-2k,4k,8k,16k}" --plots none \
    --cli $BUILD/tools/flashcore --out-dir $LOG/grid --flat --commit "${COMMIT:-unknown}" > $LOG/grid.txt 2>&1
  echo "grid rc=$?"; grep -E "cutlass_ex88|fwd +:" $LOG/grid.txt | head -12
  cp $LOG/grid/*.json $LOG/grid/*.md $DEVOUT/ 2>/dev/null
}

for s in "$@"; do
  stamp "$s"
  case $s in
    build|sass|timeline|ab|check|gputests|sanitize|correct|latency|grid) step_$s ;;
    *) echo "unknown step $s" ;;
  esac
done
cp $LOG/*.json $DEVOUT/ 2>/dev/null
stamp done
