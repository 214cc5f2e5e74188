#!/bin/bash
# Builds libfc_sm90.so (every sm90 forward instantiation + the ctypes entry) into $1
# (default /work/main/.devcarry-sm90), 2 TUs at a time; logs ptxas output per TU.
set -e
source "$(dirname "$0")/flags.sh"
OUTDIR=${1:-/work/main/.devcarry-sm90}
OBJ=${OBJ:-/tmp/sm90build}
mkdir -p "$OBJ" "$OUTDIR"
TUS="${TUS:-$(ls $ROOT/src/cuda/instantiations/fwd_sm90_*.cu)}"
build_one() {
  local src=$1 name=$(basename "$1" .cu)
  local t0=$(date +%s)
  $NVCC $NVCC_FLAGS -I$ROOT/dev/sm90 -c "$src" -o "$OBJ/$name.o" > "$OBJ/$name.log" 2>&1 || { cat "$OBJ/$name.log"; return 1; }
  echo "$name $(( $(date +%s) - t0 ))s"
}
export -f build_one; export NVCC NVCC_FLAGS OBJ
echo $TUS | tr ' ' '\n' | xargs -P 2 -I{} bash -c 'build_one {}'
$NVCC $NVCC_FLAGS -I$ROOT/dev/sm90 $CAPI_FLAGS -c "$ROOT/dev/sm90/capi.cu" -o "$OBJ/capi.o"
$NVCC -gencode=arch=compute_90a,code=sm_90a -shared -o "$OUTDIR/${LIBNAME:-libfc_sm90.so}" "$OBJ"/capi.o "$OBJ"/fwd_sm90_*.o $EXTRA_OBJS
grep -h "C7508\|C7517\|spill\|Used" "$OBJ"/fwd_sm90_*.log | sort | uniq -c | head -40
