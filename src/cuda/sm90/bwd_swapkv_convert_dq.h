// The transposed-arrangement backward's last pass: dQ = softmax_scale * (sum of the dq_accum
// slices, in slice order), rounded to the output dtype. The main kernel adds dQᵀ fragments
// (TiledMmadQ over (d, M)) in per-warp runs (common/dq_accumulate.h); thread t here takes consumer
// thread t's fragment and recovers (d column, query row) from the same partition. Fragment pairs
// are neighbouring queries of one column, so the stores are single elements (first version).
#pragma once

#include <cute/tensor.hpp>

#include "cuda/common/dq_accumulate.h"
#include "cuda/params.h"

namespace flashcore::cuda::sm90 {

// Grid (ceil(seqlen_q / kBlockM), heads_q, batch), Traits::kConsumerThreads threads.
template <class Traits>
__global__ void __launch_bounds__(Traits::kConsumerThreads)
    bwd_swapkv_convert_dq_kernel(const __grid_constant__ BwdParams params) {
  using namespace cute;
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kHeadDim = Traits::kHeadDim;
  constexpr int kFragElems = Traits::kDqFragElems;

  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * kBlockM;
  const int head = blockIdx.y;
  const int batch = blockIdx.z;

  typename Traits::TiledMmadQ mma_dq;
  auto thr_dq = mma_dq.get_thread_slice(tid);
  Tensor tdQcdQ = thr_dq.partition_C(make_identity_tensor(typename Traits::ShapedQ{}));  // (col, row)
  static_assert(decltype(size(tdQcdQ))::value == kFragElems);
  float acc[kFragElems];
  CUTE_UNROLL
  for (int i = 0; i < kFragElems; ++i) acc[i] = 0.0f;
  const float* tile = params.dq_accum +
                      ((static_cast<std::int64_t>(batch) * params.heads_q + head) * params.seqlen_q_rounded + m0) * kHeadDim;
  for (int split = 0; split < params.num_splits; ++split) {
    const float* slice_tile = tile + split * params.dq_accum_split_stride;
    CUTE_UNROLL
    for (int i = 0; i < kFragElems; i += kDqAccumVec) {
      const float4 v = *reinterpret_cast<const float4*>(slice_tile + dq_accum_offset<kFragElems>(tid / 32, tid % 32, i));
      acc[i] += v.x, acc[i + 1] += v.y, acc[i + 2] += v.z, acc[i + 3] += v.w;
    }
  }
  Element* dq = static_cast<Element*>(params.dq) + batch * params.dq_strides.batch + head * params.dq_strides.head;
  CUTE_UNROLL
  for (int i = 0; i < kFragElems; ++i) {
    const int col = get<0>(tdQcdQ(i));
    const int row = m0 + get<1>(tdQcdQ(i));
    if (row < params.seqlen_q && col < params.head_dim) {
      dq[row * params.dq_strides.row + col] = Element(acc[i] * params.softmax_scale);
    }
  }
}

}  // namespace flashcore::cuda::sm90
