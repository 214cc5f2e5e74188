// How the transposed-arrangement backward (bwd_swapkv_*.h) adds its dQᵀ partials into dq_accum:
// straight from registers, one red.global.add.v4.f32 per 4 fragment values, into the per-warp run
// layout of common/dq_accumulate.h (so each warp instruction covers 512 contiguous bytes).
//
// Why not the d128 kernel's bulk reduce-add (bwd_dq_accum.h): its fp32 staging tile (kBlockM x d
// floats, 64 KB at d256) does not fit next to this tile's 224 KB of operands.
//
// Ordering: each fp32 address of a tile belongs to one (warp, lane, value), and a thread's
// reductions to one address take effect in its program order (coherence order per location), so
// with one writer CTA per dq_accum slice (deterministic mode) the sums are the same run after run.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/common/dq_accumulate.h"

namespace flashcore::cuda::sm90 {

__forceinline__ __device__ void red_add_v4(float* address, float a, float b, float c, float d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(address), "f"(a), "f"(b), "f"(c), "f"(d)
               : "memory");
#endif
}

template <class Acc>
__forceinline__ __device__ void dq_red_add(Acc const& acc, float* tile, int warp, int lane) {
  constexpr int kFragElems = decltype(cute::size(acc))::value;
  static_assert(kFragElems % kDqAccumVec == 0);
  float* run = tile + warp * (32 * kFragElems);
  CUTE_UNROLL
  for (int i = 0; i < kFragElems; i += kDqAccumVec) {
    red_add_v4(run + dq_accum_offset_in_run<kFragElems>(lane, i), acc(i), acc(i + 1), acc(i + 2), acc(i + 3));
  }
}

}  // namespace flashcore::cuda::sm90
