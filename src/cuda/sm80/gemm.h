// Warp-level GEMMs over register fragments, operands loaded from shared memory one k-slice at a
// time right before its MMAs.
//
// Loading slice k+1 ahead of the MMAs of slice k (software prefetch) measured slower on H100
// (docs/tuning/forward.md): it holds a second set of fragments in registers, and with two CTAs
// of 4 warps per SM the ldmatrix latency is already hidden by the other warps.
#pragma once

#include <cute/tensor.hpp>

namespace flashcore::cuda::sm80 {

// acc += A B with both operands streamed from shared memory.
//   tCrA (MMA, MMA_M, MMA_K) / tCrB (MMA, MMA_N, MMA_K): register fragments;
//   tCsA / tCsB: the same operands' shared-memory partitions for the ldmatrix copies.
template <class TiledMma, class Acc, class RegA, class RegB, class SmemA, class SmemB, class CopyA, class CopyB>
__forceinline__ __device__ void gemm_smem_smem(TiledMma const& tiled_mma, Acc& acc, RegA& tCrA, RegB& tCrB,
                                               SmemA const& tCsA, SmemB const& tCsB, CopyA const& copy_a,
                                               CopyB const& copy_b, int thread_idx) {
  using namespace cute;
  auto thr_copy_a = copy_a.get_thread_slice(thread_idx);
  auto thr_copy_b = copy_b.get_thread_slice(thread_idx);
  Tensor tCrA_copy = thr_copy_a.retile_D(tCrA);
  Tensor tCrB_copy = thr_copy_b.retile_D(tCrB);
  CUTE_UNROLL
  for (int k = 0; k < size<2>(tCrA); ++k) {
    copy(copy_a, tCsA(_, _, k), tCrA_copy(_, _, k));
    copy(copy_b, tCsB(_, _, k), tCrB_copy(_, _, k));
    gemm(tiled_mma, tCrA(_, _, k), tCrB(_, _, k), acc);
  }
}

// acc += A B with A already in registers (e.g. P from the softmax) and B from shared memory.
template <class TiledMma, class Acc, class RegA, class RegB, class SmemB, class CopyB>
__forceinline__ __device__ void gemm_reg_smem(TiledMma const& tiled_mma, Acc& acc, RegA const& tCrA, RegB& tCrB,
                                              SmemB const& tCsB, CopyB const& copy_b, int thread_idx) {
  using namespace cute;
  auto thr_copy_b = copy_b.get_thread_slice(thread_idx);
  Tensor tCrB_copy = thr_copy_b.retile_D(tCrB);
  CUTE_UNROLL
  for (int k = 0; k < size<2>(tCrA); ++k) {
    copy(copy_b, tCsB(_, _, k), tCrB_copy(_, _, k));
    gemm(tiled_mma, tCrA(_, _, k), tCrB(_, _, k), acc);
  }
}

}  // namespace flashcore::cuda::sm80
