#!/bin/bash
# Builds libfc_sm90_bwd.so (the sm90 backward instantiations in $TUS + the ctypes entry) into $1
# (default /work/main/.devcarry-sm90bwd), one TU at a time; logs ptxas output per TU. VARIANTS=1 adds
# variants.cu (VARIANT_DEFS: its -D switches, e.g. -DFC_BWD_NO_D256_VARIANTS).
set -e
source "$(dirname "$0")/flags.sh"
OUTDIR=${1:-/work/main/.devcarry-sm90bwd}
OBJ=${OBJ:-/tmp/sm90bwd}
mkdir -p "$OBJ" "$OUTDIR"
TUS="${TUS:-bwd_sm90_bf16_hdim128}"
DEFS=""
for tu in $TUS; do
  d=${tu##*hdim}; t=${tu#bwd_sm90_}; t=${t%%_*}
  DEFS="$DEFS -DFC_BWD_${t^^}_D$d"
  newest=$(ls -t "$ROOT/src/cuda/instantiations/$tu.cu" "$ROOT"/src/cuda/sm90/*.h "$ROOT"/src/cuda/common/*.h \
           "$ROOT"/src/cuda/sm80/bwd_preprocess.h "$ROOT"/src/cuda/params.h | head -1)
  if [ ! -f "$OBJ/$tu.o" ] || [ "$newest" -nt "$OBJ/$tu.o" ] || [ -n "$REBUILD" ]; then
    t0=$(date +%s)
    nice -n 5 $NVCC $NVCC_FLAGS -c "$ROOT/src/cuda/instantiations/$tu.cu" -o "$OBJ/$tu.o" > "$OBJ/$tu.log" 2>&1 || { cat "$OBJ/$tu.log"; exit 1; }
    echo "$tu $(( $(date +%s) - t0 ))s"
  fi
done
EXTRA_OBJS=""
if [ -n "$VARIANTS" ]; then
  DEFS="$DEFS -DFC_BWD_VARIANTS"
  EXTRA_OBJS="$OBJ/variants.o"
  newest=$(ls -t "$ROOT"/dev/sm90_bwd/variants.cu "$ROOT"/src/cuda/sm90/*.h | head -1)
  if [ ! -f "$OBJ/variants.o" ] || [ "$newest" -nt "$OBJ/variants.o" ]; then
    t0=$(date +%s)
    nice -n 5 $NVCC $NVCC_FLAGS $VARIANT_DEFS -c "$ROOT/dev/sm90_bwd/variants.cu" -o "$OBJ/variants.o" > "$OBJ/variants.log" 2>&1 || { cat "$OBJ/variants.log"; exit 1; }
    echo "variants $(( $(date +%s) - t0 ))s"
  fi
fi
nice -n 5 $NVCC $NVCC_FLAGS $DEFS -c "$ROOT/dev/sm90_bwd/capi.cu" -o "$OBJ/capi.o"
nice -n 5 $NVCC $NVCC_FLAGS -c "$ROOT/src/cuda/sm90/bwd_workspace.cu" -o "$OBJ/bwd_workspace.o"
$NVCC -gencode=arch=compute_90a,code=sm_90a -shared -o "$OUTDIR/libfc_sm90_bwd.so" "$OBJ"/capi.o "$OBJ"/bwd_workspace.o \
  $EXTRA_OBJS $(for tu in $TUS; do echo "$OBJ/$tu.o"; done)
cp "$ROOT"/dev/sm90_bwd/*.py "$ROOT"/dev/sm90_bwd/device_run.sh "$OUTDIR"/
grep -h "C7508\|C7517\|spill\|Used" $(for tu in $TUS; do echo "$OBJ/$tu.log"; done) | sort | uniq -c
