// Warp-level GEMMs over register fragments with the shared->register loads of the next k-slice
// issued before the MMAs of the current one, so ldmatrix latency hides behind tensor-core work.
#pragma once

#include <cute/tensor.hpp>

namespace flashcore::cuda {

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
  copy(copy_a, tCsA(_, _, _0{}), tCrA_copy(_, _, _0{}));
  copy(copy_b, tCsB(_, _, _0{}), tCrB_copy(_, _, _0{}));
  CUTE_UNROLL
  for (int k = 0; k < size<2>(tCrA); ++k) {
    if (k + 1 < size<2>(tCrA)) {
      copy(copy_a, tCsA(_, _, k + 1), tCrA_copy(_, _, k + 1));
      copy(copy_b, tCsB(_, _, k + 1), tCrB_copy(_, _, k + 1));
    }
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
  copy(copy_b, tCsB(_, _, _0{}), tCrB_copy(_, _, _0{}));
  CUTE_UNROLL
  for (int k = 0; k < size<2>(tCrA); ++k) {
    if (k + 1 < size<2>(tCrA)) copy(copy_b, tCsB(_, _, k + 1), tCrB_copy(_, _, k + 1));
    gemm(tiled_mma, tCrA(_, _, k), tCrB(_, _, k), acc);
  }
}

}  // namespace flashcore::cuda
