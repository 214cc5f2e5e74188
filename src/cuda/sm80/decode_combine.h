// The split-KV combine: each query row's num_splits partial outputs (each normalised within its
// split) and partial LSEs merge into the output and the LSE:
//   lse = log(sum_s exp(lse_s)),  out = sum_s exp(lse_s - lse) out_s.
// A split that saw no key has lse_s = -inf and weight 0; a row no split saw gets 0 and -inf.
// One CTA per query row (batch x heads_q x seqlen_q of them). The LSEs are read by all threads at
// once and reduced in shared memory, the weights kept there, and each thread sums its columns over
// the splits with independent loads in flight: a loop of dependent reads per split cost ~10 us at
// batch 1 (docs/kvcache.md, v1).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/common/decode_splits.h"
#include "cuda/params.h"

namespace flashcore::cuda::sm80 {

inline constexpr int kCombineThreads = 128;
static_assert(kMaxSplits <= kCombineThreads, "one thread per split's LSE");

template <typename Element>
__global__ void __launch_bounds__(kCombineThreads) decode_combine_kernel(const __grid_constant__ DecodeParams p,
                                                                         int num_splits) {
  __shared__ float weights[kMaxSplits];
  __shared__ float partial[kCombineThreads / 32];
  __shared__ float row_lse;
  const std::int64_t row = blockIdx.x;  // ((b * heads_q) + h) * seqlen_q + i
  const std::int64_t rows = static_cast<std::int64_t>(p.batch) * p.heads_q * p.seqlen_q;
  const int i = static_cast<int>(row % p.seqlen_q);
  const int h = static_cast<int>((row / p.seqlen_q) % p.heads_q);
  const int b = static_cast<int>(row / (static_cast<std::int64_t>(p.seqlen_q) * p.heads_q));
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;

  // max over the splits' LSEs, then the sum of exp(lse_s - max): block reductions.
  const float my_lse = tid < num_splits ? p.lse_accum[tid * rows + row] : -INFINITY;
  float v = my_lse;
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float max_lse = partial[0];
  for (int w = 1; w < kCombineThreads / 32; ++w) max_lse = fmaxf(max_lse, partial[w]);
  __syncthreads();
  float e = max_lse == -INFINITY || tid >= num_splits ? 0.0f : expf(my_lse - max_lse);
  for (int offset = 16; offset > 0; offset /= 2) e += __shfl_xor_sync(0xffffffffu, e, offset);
  if (lane == 0) partial[warp] = e;
  __syncthreads();
  if (tid == 0) {
    float sum = 0.0f;
    for (int w = 0; w < kCombineThreads / 32; ++w) sum += partial[w];
    row_lse = sum > 0.0f ? max_lse + logf(sum) : -INFINITY;
  }
  __syncthreads();
  const float lse = row_lse;
  if (tid < num_splits) weights[tid] = lse == -INFINITY ? 0.0f : expf(my_lse - lse);
  __syncthreads();

  Element* out = static_cast<Element*>(p.out) + b * p.o_strides.batch + i * p.o_strides.row + h * p.o_strides.head;
  for (int c = tid; c < p.head_dim; c += kCombineThreads) {
    float o = 0.0f;
    const float* partial_o = p.o_accum + row * p.head_dim + c;
#pragma unroll 8
    for (int s = 0; s < num_splits; ++s) o += weights[s] * partial_o[s * rows * p.head_dim];
    out[c] = static_cast<Element>(o);
  }
  if (tid == 0 && p.lse != nullptr) p.lse[b * p.lse_strides.batch + h * p.lse_strides.head + i] = lse;
}

}  // namespace flashcore::cuda::sm80
