// The backward's first pass, per query row: D = rowsum(dO * O) in fp32 (the softmax gradient's
// correction term, dS = P * (dP - D)), and the forward's LSE pre-multiplied by log2(e) so the
// main kernel recomputes P = exp2(s * scale_log2 - lse_log2) with one FFMA. Rows that saw no key
// (lse = -inf) and the padding rows up to seqlen_q_rounded get lse_log2 = +inf, hence P = 0.
#pragma once

#include <cmath>

#include <cute/tensor.hpp>

#include "common/log2e.h"
#include "cuda/common/seqlen.h"
#include "cuda/params.h"

namespace flashcore::cuda::sm80 {

inline constexpr int kPreprocessThreads = 256;
inline constexpr int kPreprocessRowsPerCta = 64;

// Grid: (seqlen_q_rounded / kPreprocessRowsPerCta, heads_q, batch). One warp per row; each lane
// reads 8 contiguous elements (16 bytes) of dO and O per step.
// kZeroDqAccumCols > 0: the CTA also zeroes its rows of every dq_accum slice (rows of that many
// floats), instead of a separate memset pass over the workspace (the sm90 family; sm80 memsets).
// kRowsReadRounding > 0: the main kernel reads a sequence's rows only up to its seqlen_q rounded up
// to this (its query blocks), so a varlen CTA wholly past that writes nothing: each sequence's
// rows are padded to max_seqlen_q, and zeroing the padding of short sequences cost as much as the
// real rows (the sm90 family).
template <typename Element, int kZeroDqAccumCols = 0, int kRowsReadRounding = 0>
__global__ void __launch_bounds__(kPreprocessThreads) bwd_preprocess_kernel(const __grid_constant__ BwdParams params) {
  constexpr int kWarps = kPreprocessThreads / 32;
  constexpr int kVec = 8;
  const int head = blockIdx.y;
  const int batch = blockIdx.z;
  const int lane = threadIdx.x % 32;
  const SeqlenInfo seq(params, batch);  // varlen: rows past this sequence's end are padding
  const auto* o = static_cast<const Element*>(params.out) + batch * params.o_strides.batch +
                  seq.row_q * params.o_strides.row + head * params.o_strides.head;
  const auto* d_o = static_cast<const Element*>(params.dout) + batch * params.do_strides.batch +
                    seq.row_q * params.do_strides.row + head * params.do_strides.head;
  const float* lse = params.lse + batch * params.lse_strides.batch + head * params.lse_strides.head + seq.row_q;
  const std::int64_t row_offset = (static_cast<std::int64_t>(batch) * params.heads_q + head) * params.seqlen_q_rounded;
  if constexpr (kRowsReadRounding > 0) {
    const int rows_read = (seq.seqlen_q + kRowsReadRounding - 1) / kRowsReadRounding * kRowsReadRounding;
    if (int(blockIdx.x) * kPreprocessRowsPerCta >= rows_read) return;
  }

  if constexpr (kZeroDqAccumCols > 0) {
    static_assert(kZeroDqAccumCols % 4 == 0);
    constexpr int kVecs = kPreprocessRowsPerCta * kZeroDqAccumCols / 4;  // float4s of the CTA's rows
    const std::int64_t first = (row_offset + std::int64_t(blockIdx.x) * kPreprocessRowsPerCta) * kZeroDqAccumCols;
    for (int split = 0; split < params.num_splits; ++split) {
      float4* rows = reinterpret_cast<float4*>(params.dq_accum + split * params.dq_accum_split_stride + first);
      for (int i = threadIdx.x; i < kVecs; i += kPreprocessThreads) rows[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }

  for (int r = threadIdx.x / 32; r < kPreprocessRowsPerCta; r += kWarps) {
    const int row = blockIdx.x * kPreprocessRowsPerCta + r;
    float dot = 0.0f;
    if (row < seq.seqlen_q) {
      for (int col = lane * kVec; col < params.head_dim; col += 32 * kVec) {
        const uint4 o_raw = *reinterpret_cast<const uint4*>(o + row * params.o_strides.row + col);
        const uint4 do_raw = *reinterpret_cast<const uint4*>(d_o + row * params.do_strides.row + col);
        const auto* o_vec = reinterpret_cast<const Element*>(&o_raw);
        const auto* do_vec = reinterpret_cast<const Element*>(&do_raw);
        CUTE_UNROLL
        for (int i = 0; i < kVec; ++i) dot += static_cast<float>(o_vec[i]) * static_cast<float>(do_vec[i]);
      }
    }
    CUTE_UNROLL
    for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffff, dot, offset);
    if (lane == 0) {
      params.dsum[row_offset + row] = dot;
      float lse_log2 = INFINITY;
      if (row < seq.seqlen_q) {
        const float value = lse[row];
        if (value != -INFINITY) lse_log2 = value * static_cast<float>(kLog2e);
      }
      params.lse_log2[row_offset + row] = lse_log2;
    }
  }
}

}  // namespace flashcore::cuda::sm80
