// The backward's last pass: dQ = softmax_scale * (sum of the dq_accum slices, in slice order),
// rounded to the output dtype. The main kernel accumulates dQ unscaled (dS K), in fp32.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/sm80/bwd_params.h"

namespace flashcore::cuda::sm80 {

inline constexpr int kConvertThreads = 256;
inline constexpr int kConvertRowsPerCta = 32;

// Grid: (ceil(seqlen_q / kConvertRowsPerCta), heads_q, batch). Each thread converts 8 columns of
// a row at a time: two 16-byte loads per slice, one 16-byte store.
template <typename Element, int kHeadDim>
__global__ void __launch_bounds__(kConvertThreads) bwd_convert_dq_kernel(const __grid_constant__ BwdParams params) {
  constexpr int kVec = 8;
  const int head = blockIdx.y;
  const int batch = blockIdx.z;
  const int row0 = blockIdx.x * kConvertRowsPerCta;
  const int rows = min(kConvertRowsPerCta, params.seqlen_q - row0);
  const int vecs_per_row = params.head_dim / kVec;  // head_dim % 8 == 0 is checked by the caller
  const float* accum = params.dq_accum +
                       ((static_cast<std::int64_t>(batch) * params.heads_q + head) * params.seqlen_q_rounded + row0) *
                           kHeadDim;
  auto* dq = static_cast<Element*>(params.dq) + batch * params.dq_batch_stride + head * params.dq_head_stride;

  for (int i = threadIdx.x; i < rows * vecs_per_row; i += kConvertThreads) {
    const int row = i / vecs_per_row;
    const int col = (i % vecs_per_row) * kVec;
    float sum[kVec] = {};
    for (int split = 0; split < params.num_splits; ++split) {
      const float4* src = reinterpret_cast<const float4*>(accum + split * params.dq_accum_split_stride +
                                                          row * kHeadDim + col);
      const float4 lo = src[0];
      const float4 hi = src[1];
      sum[0] += lo.x, sum[1] += lo.y, sum[2] += lo.z, sum[3] += lo.w;
      sum[4] += hi.x, sum[5] += hi.y, sum[6] += hi.z, sum[7] += hi.w;
    }
    uint4 out_raw;
    auto* out = reinterpret_cast<Element*>(&out_raw);
    CUTE_UNROLL
    for (int j = 0; j < kVec; ++j) out[j] = static_cast<Element>(sum[j] * params.softmax_scale);
    *reinterpret_cast<uint4*>(dq + (row0 + row) * params.dq_row_stride + col) = out_raw;
  }
}

}  // namespace flashcore::cuda::sm80
