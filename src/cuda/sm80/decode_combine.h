// The split-KV combine: each query row's num_splits partial outputs (each normalised within its
// split) and partial LSEs merge into the output and the LSE:
//   lse = log(sum_s exp(lse_s)),  out = sum_s exp(lse_s - lse) out_s.
// A split that saw no key has lse_s = -inf and weight 0; a row no split saw gets 0 and -inf.
//
// Two ways to run it:
//  - merge_splits_in_last_cta (the default): at the end of the decode kernel, the split CTA of a
//    (sequence, kv head, row block) that arrives last (an arrival counter, atomicInc, which wraps
//    back to 0 on the last arrival, so the counters stay zero between calls) merges that block's
//    rows. No second launch and no second pass over the rows: measured at batch 1 (docs/kvcache.md,
//    v5) 24.1 us a step against 24.9 with the separate kernel; the merge itself lengthened the decode
//    kernel by ~4 us there (a chain of L2 round trips in one CTA at the very end); v6 cut the chain
//    to two round trips after the count. v5b's cp.async-staged merge was slower (27.6 us).
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

namespace flashcore::cuda::sm80 {

// The rule's two pieces, the one place it is written (this file's two merges and sm90's cluster
// merge, decode_cluster_merge.h, reduce over the splits in their own ways around them): split s's
// weight exp(lse_s - reference), 0 when the reference is -inf (no split saw a key), and the LSE of
// the whole from the largest split LSE and the sum of the weights relative to it.
__device__ __forceinline__ float split_weight(float lse_s, float reference) {
  return reference == -INFINITY ? 0.0f : expf(lse_s - reference);
}
__device__ __forceinline__ float combined_lse(float max_lse, float sum_of_weights) {
  return sum_of_weights > 0.0f ? max_lse + logf(sum_of_weights) : -INFINITY;
}

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
  float e = tid < num_splits ? split_weight(my_lse, max_lse) : 0.0f;
  for (int offset = 16; offset > 0; offset /= 2) e += __shfl_xor_sync(0xffffffffu, e, offset);
  if (lane == 0) partial[warp] = e;
  __syncthreads();
  if (tid == 0) {
    float sum = 0.0f;
    for (int w = 0; w < kCombineThreads / 32; ++w) sum += partial[w];
    row_lse = combined_lse(max_lse, sum);
  }
  __syncthreads();
  const float lse = row_lse;
  if (tid < num_splits) weights[tid] = split_weight(my_lse, lse);
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

// Called by every thread of every split CTA once its partial (decode_epilogue.h) is stored. The
// fence + barrier + counter is the classic last-block pattern: each thread's partial stores are made
// visible device-wide before thread 0 counts the CTA in, and the last CTA reads the others' partials
// with L2 loads (ld.global.cg: nothing stale in its L1). One warp a row: the lanes read the splits'
// LSEs (up to kMaxSplits = 4 x 32) and, in the same round trip, the first kInFlight splits' partial
// columns (they do not depend on the weights); the LSEs reduce with shuffles into weights kept in
// shared memory while those loads are in flight, then each lane sums its 4 columns over the splits.
// This tail runs after the slowest split, so its L2 round trips add straight to the step's time:
// v5 issued the LSEs first and then 8 partials at a time (5 round trips at 32 splits), v6 16 at a
// time (2). kInFlight = 32 (one round trip at 32 splits; an A/B variant) measured no faster (v7):
// what the tail costs (~4 us at batch 1) is the chain fence -> count -> loads -> stores, not the
// number of round trips.
// The merge of one (sequence, kv head, row block)'s rows once every split's partial is visible:
// merge_splits_in_last_cta's second half, and decode_merge_kernel's whole body.
template <typename Element, int kRows, int kThreads, int kInFlight = 16>
__device__ __forceinline__ void merge_split_rows(const DecodeParams& p, int b, int hk, int row0, int num_splits) {
  constexpr int kWarps = kThreads / 32;
  // kInFlight: 16-byte loads a lane has in flight (4 registers each), free after the mainloop.
  static_assert(kMaxSplits <= 4 * 32, "four LSEs a lane");
  __shared__ float weights[kWarps][kMaxSplits];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int rows_total = p.group_size * p.seqlen_q;
  const std::int64_t rows = static_cast<std::int64_t>(p.batch) * p.heads_q * p.seqlen_q;
  const std::int64_t split_stride = rows * p.head_dim;  // floats between two splits' partials of a row
  for (int m = warp; m < kRows && row0 + m < rows_total; m += kWarps) {
    const int r = row0 + m;
    const int h = hk * p.group_size + r / p.seqlen_q;
    const int i = r % p.seqlen_q;
    const std::int64_t row = (static_cast<std::int64_t>(b) * p.heads_q + h) * p.seqlen_q + i;
    const float* partial_o = p.o_accum + row * p.head_dim;
    float4 x[kInFlight];
    // Columns [c, c + 4) of splits [s0, s0 + kInFlight) (zeros past them); head_dim % 4 == 0.
    const auto load_partials = [&](int c, int s0) {
#pragma unroll
      for (int k = 0; k < kInFlight; ++k) {
        const int s = s0 + k;
        x[k] = c < p.head_dim && s < num_splits
                   ? __ldcg(reinterpret_cast<const float4*>(partial_o + s * split_stride + c))
                   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    };
    float lse_s[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int s = lane + 32 * k;
      lse_s[k] = s < num_splits ? __ldcg(p.lse_accum + s * rows + row) : -INFINITY;
    }
    load_partials(lane * 4, 0);
    float max_lse = fmaxf(fmaxf(lse_s[0], lse_s[1]), fmaxf(lse_s[2], lse_s[3]));
    for (int offset = 16; offset > 0; offset /= 2) max_lse = fmaxf(max_lse, __shfl_xor_sync(0xffffffffu, max_lse, offset));
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) sum += split_weight(lse_s[k], max_lse);
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    const float lse = combined_lse(max_lse, sum);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int s = lane + 32 * k;
      if (s < num_splits) weights[warp][s] = split_weight(lse_s[k], lse);
    }
    __syncwarp();
    Element* out = static_cast<Element*>(p.out) + b * p.o_strides.batch + i * p.o_strides.row + h * p.o_strides.head;
    for (int c0 = 0; c0 < p.head_dim; c0 += 32 * 4) {
      const int c = c0 + lane * 4;
      float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (int s0 = 0; s0 < num_splits; s0 += kInFlight) {
        if (c0 > 0 || s0 > 0) load_partials(c, s0);  // the first batch is already in x
#pragma unroll
        for (int k = 0; k < kInFlight; ++k) {
          const float wt = s0 + k < num_splits ? weights[warp][s0 + k] : 0.0f;
          o.x += wt * x[k].x;
          o.y += wt * x[k].y;
          o.z += wt * x[k].z;
          o.w += wt * x[k].w;
        }
      }
      if (c < p.head_dim) {
        out[c] = static_cast<Element>(o.x);
        out[c + 1] = static_cast<Element>(o.y);
        out[c + 2] = static_cast<Element>(o.z);
        out[c + 3] = static_cast<Element>(o.w);
      }
    }
    if (lane == 0 && p.lse != nullptr) p.lse[b * p.lse_strides.batch + h * p.lse_strides.head + i] = lse;
    __syncwarp();  // the weights are read before the next row overwrites them
  }
}

// The arrival count increments modulo num_splits (atom.inc wraps to 0 after num_splits - 1).
// kLightCount (docs/kvcache.md, v8): the barrier first, then thread 0's count as one acq_rel atomic
// at gpu scope, the pattern of cooperative groups' grid sync: the CTA's stores precede the barrier,
// the barrier precedes the release, so the release publishes them all (PTX memory model:
// causality order is transitive through bar.sync); in the last CTA the acquire precedes the
// barrier, which precedes every thread's loads. Otherwise every thread fences before the barrier
// and again after the count (v5-v7).
__device__ __forceinline__ unsigned count_split_arrival(unsigned* counter, unsigned last, bool acq_rel) {
  if (!acq_rel) return atomicInc(counter, last);
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;\n" : "=r"(old) : "l"(counter), "r"(last) : "memory");
  return old;
}

template <typename Element, int kRows, int kThreads, int kInFlight = 16, bool kLightCount = false>
__device__ __forceinline__ void merge_splits_in_last_cta(const DecodeParams& p, int b, int hk, int row0,
                                                         int num_splits) {
  __shared__ bool is_last;
  if constexpr (!kLightCount) __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned* counter = p.split_counters + (static_cast<std::int64_t>(blockIdx.z) * gridDim.y + blockIdx.y);
    const unsigned last = static_cast<unsigned>(num_splits - 1);
    is_last = count_split_arrival(counter, last, kLightCount) == last;
  }
  __syncthreads();
  if (!is_last) return;
  if constexpr (!kLightCount) __threadfence();
  merge_split_rows<Element, kRows, kThreads, kInFlight>(p, b, hk, row0, num_splits);
}

#if defined(FLASHCORE_DECODE_AB_VARIANTS)
// An A/B variant (docs/kvcache.md, v7 call 3: measured no faster at batch 1, 21.3 us against 21.0):
// the merge as a kernel of its own, one CTA a (sequence, kv head, row block) like the fused merge's
// last CTA, launched with programmatic dependent launch (decode_launch_template.h, "pdl_merge")
// right behind a decode kernel that only stores its partials (no fence, no arrival count) and lets
// its dependents launch early (griddepcontrol.launch_dependents): this kernel's CTAs wait in
// griddepcontrol.wait, which returns once the decode grid has finished and its stores are visible —
// the point the fence and count reached too, hence no gain. sm90+; on older GPUs the launch falls
// back to stream order and the wait is compiled out.
template <typename Element, int kRows, int kThreads>
__global__ void __launch_bounds__(kThreads) decode_merge_kernel(const __grid_constant__ DecodeParams p,
                                                               int num_splits) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  const int m_blocks = (p.group_size * p.seqlen_q + kRows - 1) / kRows;
  merge_split_rows<Element, kRows, kThreads>(p, blockIdx.z, blockIdx.y / m_blocks, (blockIdx.y % m_blocks) * kRows,
                                             num_splits);
}
#endif

}  // namespace flashcore::cuda::sm80
