// The split-KV combine: each query row's num_splits partial outputs (each normalised within its
// split) and partial LSEs merge into the output and the LSE:
//   lse = log(sum_s exp(lse_s)),  out = sum_s exp(lse_s - lse) out_s.
// A split that saw no key has lse_s = -inf and weight 0; a row no split saw gets 0 and -inf.
//
// Two ways to run it:
//  - merge_splits_in_last_cta (the default): at the end of the decode kernel, the split CTA of a
//    (sequence, kv head, row block) that arrives last (an arrival counter, atomicInc, which wraps
//    back to 0 on the last arrival, so the counters stay zero between calls) merges that block's
//    rows. No second launch: at batch 1 the separate kernel cost ~6 us of a ~27 us step
//    (docs/kvcache.md, v5).
//  - decode_combine_kernel (FLASHCORE_DECODE_COMBINE=kernel, kept for A/B runs): one CTA per query
//    row. The LSEs are read by all threads at once and reduced in shared memory, the weights kept
//    there, and each thread sums its columns over the splits with independent loads in flight: a
//    loop of dependent reads per split cost ~10 us at batch 1 (docs/kvcache.md, v1).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/common/decode_splits.h"
#include "cuda/params.h"
#include "cuda/sm80/decode_schedule.h"

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

// Called by every thread of every split CTA once its partial (decode_epilogue.h) is stored, with
// `scratch` = the kernel's dynamic shared memory (kScratchFloats floats, free by now). The barrier +
// fence + counter is the last-block pattern (as cooperative groups' grid sync: the barrier orders
// the CTA's partial stores before thread 0's fence and count); the last CTA reads the others'
// partials from L2 (cp.async.cg, ld.global.cg: nothing stale in its L1).
//
// The last CTA's merge is a chain of latencies at the end of the kernel, so its loads go out
// together: all partial outputs of a pass of rows are cp.async-copied into shared memory at once
// while each warp reads its rows' LSEs into registers (lane s holds splits s, s + 32, ..: kMaxSplits
// = 4 x 32) and turns them into weights; then each lane sums 4 columns over the splits from shared
// memory. v5's first version summed from global memory with 8 loads in flight a lane: its merge
// made the decode kernel ~4 us longer at batch 1 (docs/kvcache.md). When one row's partials do not
// fit in shared memory (the FMA kernel at 128 splits), the sum reads global memory instead.
template <typename Element, int kRows, int kThreads, int kScratchFloats>
__device__ __forceinline__ void merge_splits_in_last_cta(const DecodeParams& p, float* scratch, int b, int hk,
                                                         int row0, int num_splits) {
  constexpr int kWarps = kThreads / 32;
  static_assert(kMaxSplits <= 4 * 32, "four LSEs a lane");
  static_assert(kScratchFloats >= kRows * kMaxSplits, "weights of every row");
  __shared__ bool is_last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    unsigned* counter = p.split_counters + (static_cast<std::int64_t>(blockIdx.z) * gridDim.y + blockIdx.y);
    is_last = atomicInc(counter, static_cast<unsigned>(num_splits - 1)) == static_cast<unsigned>(num_splits - 1);
    if (is_last) __threadfence();
  }
  __syncthreads();
  if (!is_last) return;

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int valid_rows = min(kRows, p.group_size * p.seqlen_q - row0);
  const std::int64_t rows = static_cast<std::int64_t>(p.batch) * p.heads_q * p.seqlen_q;
  const int chunks = p.head_dim / 4;  // float4s a partial row (head_dim % 8 == 0)
  const auto partial_row = [&](int m) {  // index of packed row row0 + m among the query rows
    const int r = row0 + m;
    return (static_cast<std::int64_t>(b) * p.heads_q + hk * p.group_size + r / p.seqlen_q) * p.seqlen_q +
           r % p.seqlen_q;
  };
  // Scratch: [pass rows][num_splits][head_dim] partials, then [pass rows][num_splits] weights.
  const int row_floats = num_splits * (p.head_dim + 1);
  const bool staged = row_floats <= kScratchFloats;
  const int pass_rows_max = staged ? kScratchFloats / row_floats : kRows;
  for (int m0 = 0; m0 < valid_rows; m0 += pass_rows_max) {
    const int pass_rows = min(pass_rows_max, valid_rows - m0);
    float* weights = staged ? scratch + pass_rows * num_splits * p.head_dim : scratch;
    if (staged) {
      const int items = pass_rows * num_splits * chunks;
      for (int idx = threadIdx.x; idx < items; idx += kThreads) {
        const int c = idx % chunks;
        const int s = (idx / chunks) % num_splits;
        const int mm = idx / (chunks * num_splits);
        decode::cp_async_16(scratch + (mm * num_splits + s) * p.head_dim + 4 * c,
                            p.o_accum + (s * rows + partial_row(m0 + mm)) * p.head_dim + 4 * c, true);
      }
      decode::cp_async_commit();
    }
    // Weights (and the LSE) of each row of the pass, a warp a row, while the copies fly.
    for (int mm = warp; mm < pass_rows; mm += kWarps) {
      const std::int64_t row = partial_row(m0 + mm);
      float lse_s[4];
      float max_lse = -INFINITY;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int s = lane + 32 * k;
        lse_s[k] = s < num_splits ? __ldcg(p.lse_accum + s * rows + row) : -INFINITY;
        max_lse = fmaxf(max_lse, lse_s[k]);
      }
      for (int offset = 16; offset > 0; offset /= 2) max_lse = fmaxf(max_lse, __shfl_xor_sync(0xffffffffu, max_lse, offset));
      float sum = 0.0f;
#pragma unroll
      for (int k = 0; k < 4; ++k) sum += max_lse == -INFINITY ? 0.0f : expf(lse_s[k] - max_lse);
      for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      const float lse = sum > 0.0f ? max_lse + logf(sum) : -INFINITY;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int s = lane + 32 * k;
        if (s < num_splits) weights[mm * num_splits + s] = lse == -INFINITY ? 0.0f : expf(lse_s[k] - lse);
      }
      const int r = row0 + m0 + mm;
      const int h = hk * p.group_size + r / p.seqlen_q;
      if (lane == 0 && p.lse != nullptr) p.lse[b * p.lse_strides.batch + h * p.lse_strides.head + r % p.seqlen_q] = lse;
    }
    decode::cp_async_wait<0>();
    __syncthreads();  // the copies and the weights are visible to every warp
    for (int mm = warp; mm < pass_rows; mm += kWarps) {
      const std::int64_t row = partial_row(m0 + mm);
      const int r = row0 + m0 + mm;
      const int h = hk * p.group_size + r / p.seqlen_q;
      const int i = r % p.seqlen_q;
      Element* out = static_cast<Element*>(p.out) + b * p.o_strides.batch + i * p.o_strides.row + h * p.o_strides.head;
      const float* w = weights + mm * num_splits;
      for (int c = lane * 4; c < p.head_dim; c += 32 * 4) {
        float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 8
        for (int s = 0; s < num_splits; ++s) {
          const float4 x = staged ? *reinterpret_cast<const float4*>(scratch + (mm * num_splits + s) * p.head_dim + c)
                                  : __ldcg(reinterpret_cast<const float4*>(p.o_accum + (s * rows + row) * p.head_dim + c));
          o.x += w[s] * x.x;
          o.y += w[s] * x.y;
          o.z += w[s] * x.z;
          o.w += w[s] * x.w;
        }
        out[c] = static_cast<Element>(o.x);
        out[c + 1] = static_cast<Element>(o.y);
        out[c + 2] = static_cast<Element>(o.z);
        out[c + 3] = static_cast<Element>(o.w);
      }
    }
    __syncthreads();  // the next pass overwrites the scratch
  }
}

}  // namespace flashcore::cuda::sm80
