// Where the sm80 backward kernel's dQ partials go in the dq_accum workspace, and how it adds them.
//
// dq_accum holds one kBlockM x kHeadDim tile per (split, batch, query head, query block),
// contiguous, at the tile's row-major position (cuda/params.h); inside a tile, values follow the
// dQ MMA's fragments in per-warp runs (common/dq_accumulate.h), read back by bwd_convert_dq.h.
//
// The policy that adds them is chosen here, once, for the code being compiled: the sm80 family's
// files are also compiled to sm_90 SASS, and there the copy engine's bulk reduce-add beats atomics.
#pragma once

#include <cstdint>

#include "cuda/common/dq_accumulate.h"
#include "cuda/params.h"

namespace flashcore::cuda::sm80 {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
using DqAccumulate = DqBulkReduceAdd;
#else
using DqAccumulate = DqAtomicAdd;
#endif

// Start of the tile of (batch, query head, query block starting at row m0) in one dq_accum slice.
template <int kHeadDim>
__forceinline__ __device__ std::int64_t dq_accum_tile_offset(const BwdParams& params, int batch, int head, int m0) {
  return ((static_cast<std::int64_t>(batch) * params.heads_q + head) * params.seqlen_q_rounded + m0) * kHeadDim;
}

}  // namespace flashcore::cuda::sm80
