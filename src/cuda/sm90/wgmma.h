// One warpgroup-wide GEMM: C (+)= A B issued as a batch of wgmma over the K slices.
//
// kZeroInit: the first slice overwrites C (ScaleOut::Zero), so C needs no clearing.
// kWait: the number of wgmma batches left in flight on return (-1: do not wait at all).
// kRegA: A is a register fragment (RS); its registers are fenced so the compiler neither
//        moves their definition past the issue nor reuses them while the wgmma reads them.
#pragma once

#include <cute/arch/mma_sm90_gmma.hpp>
#include <cute/tensor.hpp>

namespace flashcore::cuda::sm90 {

template <bool kZeroInit, int kWait, bool kRegA, class TiledMma, class TensorA, class TensorB, class TensorC>
__forceinline__ __device__ void wgmma_gemm(TiledMma& tiled_mma, TensorA& tCrA, TensorB const& tCrB,
                                           TensorC& tCrC) {
  using namespace cute;
  if constexpr (kRegA) warpgroup_fence_operand(tCrA);
  warpgroup_fence_operand(tCrC);
  warpgroup_arrive();
  if constexpr (kZeroInit) tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
  CUTE_UNROLL
  for (int k = 0; k < size<2>(tCrA); ++k) {
    cute::gemm(tiled_mma, tCrA(_, _, k), tCrB(_, _, k), tCrC);
    tiled_mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  if constexpr (kWait >= 0) warpgroup_wait<kWait>();
  warpgroup_fence_operand(tCrC);
  if constexpr (kRegA) warpgroup_fence_operand(tCrA);
}

}  // namespace flashcore::cuda::sm90
