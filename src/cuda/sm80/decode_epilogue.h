// The decode kernels' epilogue: kGroups independent online softmaxes over disjoint keys of the
// same rows (key groups of the FMA kernel, warps of the MMA kernel) merge into the CTA's result,
// which is the output (one split) or the split's normalised partial output and LSE, merged by the
// split CTA that finishes last (decode_combine.h). Every thread of the CTA takes part; the caller
// synchronised the CTA after filling the shared-memory partials:
//   merge_o  (kGroups, kRows, kHeadDim) fp32 unnormalised outputs
//   merge_ml (kGroups, kRows, 2)        running max (log2 units) and sum of exp2(score - max)
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/params.h"
#include "cuda/sm80/decode_combine.h"

namespace flashcore::cuda::sm80 {

// Row m's columns c..c+7 over the CTA's keys: the kGroups partials merged, normalised by the row's
// sum (a row with no visible key gives 0), into o; returns the row's LSE (natural log; -inf then).
template <int kHeadDim, int kRows, int kGroups>
__device__ __forceinline__ float merge_group_partials(const float* merge_o, const float* merge_ml, int m, int c,
                                                      float (&o)[8]) {
  constexpr float kLn2 = 0.6931471805599453f;
  float max_all = -INFINITY;
  for (int g = 0; g < kGroups; ++g) max_all = fmaxf(max_all, merge_ml[(g * kRows + m) * 2]);
  const float base = max_all == -INFINITY ? 0.0f : max_all;
  float sum = 0.0f;
#pragma unroll
  for (int e = 0; e < 8; ++e) o[e] = 0.0f;
  for (int g = 0; g < kGroups; ++g) {
    const float weight = exp2f(merge_ml[(g * kRows + m) * 2] - base);
    sum += weight * merge_ml[(g * kRows + m) * 2 + 1];
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] += weight * merge_o[(g * kRows + m) * kHeadDim + c + e];
  }
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
  for (int e = 0; e < 8; ++e) o[e] *= inv;
  return sum > 0.0f ? (max_all + log2f(sum)) * kLn2 : -INFINITY;
}

// A one-split call's result: 8 output columns of query row i of head h (one 16-byte store) and,
// from the thread holding column 0, the row's LSE.
template <typename Element>
__device__ __forceinline__ void store_decode_output(const DecodeParams& p, const float (&o)[8], float lse, int b,
                                                    int h, int i, int c) {
  alignas(16) Element out8[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) out8[e] = static_cast<Element>(o[e]);
  Element* dst = static_cast<Element*>(p.out) + b * p.o_strides.batch + i * p.o_strides.row + h * p.o_strides.head + c;
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(out8);
  if (c == 0 && p.lse != nullptr) p.lse[b * p.lse_strides.batch + h * p.lse_strides.head + i] = lse;
}

template <typename Element, int kHeadDim, int kRows, int kGroups, int kThreads, int kMergeInFlight = 16,
          bool kLightCount = false>
__device__ __forceinline__ void decode_epilogue(const DecodeParams& p, const float* merge_o, const float* merge_ml,
                                                int b, int hk, int row0, int split, int num_splits) {
  constexpr int kLanes = kHeadDim / 8;
  const int rows_total = p.group_size * p.seqlen_q;
  for (int task = threadIdx.x; task < kRows * kLanes; task += kThreads) {
    const int m = task / kLanes;
    const int c = (task % kLanes) * 8;
    const int r = row0 + m;
    if (r >= rows_total || c >= p.head_dim) continue;
    const int h = hk * p.group_size + r / p.seqlen_q;
    const int i = r % p.seqlen_q;
    float o[8];
    const float lse = merge_group_partials<kHeadDim, kRows, kGroups>(merge_o, merge_ml, m, c, o);
    if (num_splits == 1) {
      store_decode_output<Element>(p, o, lse, b, h, i, c);
    } else {
      const std::int64_t row = ((static_cast<std::int64_t>(split) * p.batch + b) * p.heads_q + h) * p.seqlen_q + i;
      float4* dst = reinterpret_cast<float4*>(p.o_accum + row * p.head_dim + c);  // head_dim % 8 == 0: aligned
      dst[0] = make_float4(o[0], o[1], o[2], o[3]);
      dst[1] = make_float4(o[4], o[5], o[6], o[7]);
      if (c == 0) p.lse_accum[row] = lse;
    }
  }
  if (num_splits > 1 && p.split_counters != nullptr) {
    merge_splits_in_last_cta<Element, kRows, kThreads, kMergeInFlight, kLightCount>(p, b, hk, row0, num_splits);
  }
}

}  // namespace flashcore::cuda::sm80
