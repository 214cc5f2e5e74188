# nvcc flags for the sm90 backward TUs (sm_90a only, never a plain sm_90 pass).
CUTLASS_INC=${CUTLASS_INC:-$(ls -d /work/main/.venv/lib/python3*/site-packages/cutlass_library/source/include)}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
NVCC=/usr/local/cuda/bin/nvcc
NVCC_FLAGS="-gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr \
 -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED -Xptxas=--warn-on-spills -Xptxas=-v -Xcompiler=-fPIC \
 -I$ROOT/src -I$ROOT/include -I$CUTLASS_INC"
