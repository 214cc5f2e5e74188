// The split-KV combine: each query row's num_splits partial outputs (each normalised within its
// split) and partial LSEs merge into the output and the LSE:
//   lse = log(sum_s exp(lse_s)),  out = sum_s exp(lse_s - lse) out_s.
// A split that saw no key has lse_s = -inf and weight 0; a row no split saw gets 0 and -inf.
// One CTA per query row (batch x heads_q x seqlen_q of them), one thread per column.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/params.h"

namespace flashcore::cuda::sm80 {

template <typename Element>
__global__ void decode_combine_kernel(const __grid_constant__ DecodeParams p, int num_splits) {
  const std::int64_t row = blockIdx.x;  // ((b * heads_q) + h) * seqlen_q + i
  const std::int64_t rows = static_cast<std::int64_t>(p.batch) * p.heads_q * p.seqlen_q;
  const int i = static_cast<int>(row % p.seqlen_q);
  const int h = static_cast<int>((row / p.seqlen_q) % p.heads_q);
  const int b = static_cast<int>(row / (static_cast<std::int64_t>(p.seqlen_q) * p.heads_q));
  float max_lse = -INFINITY;
  for (int s = 0; s < num_splits; ++s) max_lse = fmaxf(max_lse, p.lse_accum[s * rows + row]);
  float sum = 0.0f;
  if (max_lse != -INFINITY) {
    for (int s = 0; s < num_splits; ++s) sum += expf(p.lse_accum[s * rows + row] - max_lse);
  }
  const float lse = sum > 0.0f ? max_lse + logf(sum) : -INFINITY;
  Element* out = static_cast<Element*>(p.out) + b * p.o_strides.batch + i * p.o_strides.row + h * p.o_strides.head;
  for (int c = threadIdx.x; c < p.head_dim; c += blockDim.x) {
    float o = 0.0f;
    if (sum > 0.0f) {
      for (int s = 0; s < num_splits; ++s) {
        const float weight = expf(p.lse_accum[s * rows + row] - lse);
        o += weight * p.o_accum[(s * rows + row) * p.head_dim + c];
      }
    }
    out[c] = static_cast<Element>(o);
  }
  if (threadIdx.x == 0 && p.lse != nullptr) p.lse[b * p.lse_strides.batch + h * p.lse_strides.head + i] = lse;
}

}  // namespace flashcore::cuda::sm80
