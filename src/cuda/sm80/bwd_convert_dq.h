// The backward's last pass: dQ = softmax_scale * (sum of the dq_accum slices, in slice order),
// rounded to the output dtype. The main kernel accumulates dQ unscaled (dS K), in fp32, in the
// fragment-ordered tile layout of bwd_dq_accum.h; this pass reads each tile back with the same
// MMA partition, then writes rows through shared memory as 16-byte stores.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/common/epilogue.h"
#include "cuda/common/fragment.h"
#include "cuda/sm80/bwd_dq_accum.h"
#include "cuda/common/seqlen.h"
#include "cuda/params.h"

namespace flashcore::cuda::sm80 {

// Grid: (ceil(seqlen_q / kBlockM), heads_q, batch), Traits::kNThreads threads: one CTA per query
// block, each thread owning the values its namesake thread of the main kernel added.
template <class Traits>
__global__ void __launch_bounds__(Traits::kNThreads) bwd_convert_dq_kernel(const __grid_constant__ BwdParams params) {
  using namespace cute;
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kHeadDim = Traits::kHeadDim;
  __shared__ __align__(128) Element smem_dq[cosize_v<typename Traits::SmemLayoutQdO>];

  const int tid = threadIdx.x;
  const int m_block = blockIdx.x;
  const int head = blockIdx.y;
  const int batch = blockIdx.z;
  const SeqlenInfo seq(params, batch);
  if (m_block * kBlockM >= seq.seqlen_q) return;  // varlen: the grid covers the longest sequence

  typename Traits::TiledMmadQ tiled_mma_dq;
  Tensor acc_dq = partition_fragment_C(tiled_mma_dq, Shape<Int<kBlockM>, Int<kHeadDim>>{});  // (MMA, MMA_M, MMA_d)
  constexpr int kFragElems = decltype(size(acc_dq))::value;
  clear(acc_dq);
  const float* tile = params.dq_accum + dq_accum_tile_offset<kHeadDim>(params, batch, head, m_block * kBlockM);
  for (int split = 0; split < params.num_splits; ++split) {
    const float* slice_tile = tile + split * params.dq_accum_split_stride;
    CUTE_UNROLL
    for (int i = 0; i < kFragElems; i += kDqAccumVec) {
      const float4 v = *reinterpret_cast<const float4*>(slice_tile + dq_accum_offset<kFragElems>(tid / 32, tid % 32, i));
      acc_dq(i) += v.x, acc_dq(i + 1) += v.y, acc_dq(i + 2) += v.z, acc_dq(i + 3) += v.w;
    }
  }
  CUTE_UNROLL
  for (int i = 0; i < kFragElems; ++i) acc_dq(i) *= params.softmax_scale;
  Tensor rdQ = convert_fragment<Element>(acc_dq);

  // Fragments -> smem (kBlockM, kHeadDim) -> 16-byte row stores, rows past seqlen_q skipped.
  Tensor sdQ = make_tensor(make_smem_ptr(smem_dq), typename Traits::SmemLayoutQdO{});  // (kBlockM, kHeadDim)
  fragment_to_smem(typename Traits::SmemCopyAtomStore{}, tiled_mma_dq, rdQ, sdQ, tid);
  __syncthreads();

  const int m0 = m_block * kBlockM;
  Tensor gdQ = make_tensor(make_gmem_ptr(static_cast<Element*>(params.dq) + batch * params.dq_strides.batch +
                                         head * params.dq_strides.head + (seq.row_q + m0) * params.dq_strides.row),
                           Shape<Int<kBlockM>, Int<kHeadDim>>{}, make_stride(params.dq_strides.row, _1{}));
  smem_to_gmem<typename Traits::GmemTiledCopyStore>(sdQ, gdQ, seq.seqlen_q - m0, params.head_dim, tid);
}

}  // namespace flashcore::cuda::sm80
