// Online softmax over register tiles of scores (FlashAttention's running max and sum).
//
// A thread holds, for each of its rows, a few columns of the score tile; the 4 lanes of a quad
// together hold a whole row of an m16n8 atom, so row reductions are a per-thread reduction then
// two xor-shuffles. Scores are kept raw (unscaled); exponentials use
//   exp(scale * (s - m)) = exp2(s * scale_log2 - m * scale_log2)
// with scale_log2 = scale * log2(e) pre-multiplied, so each element costs one FFMA and one EX2.
#pragma once

#include <cmath>

#include <cute/tensor.hpp>

#include "cuda/common/fragment.h"

namespace flashcore::cuda {

__forceinline__ __device__ float quad_allreduce_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, 2));
  return fmaxf(x, __shfl_xor_sync(0xffffffff, x, 1));
}

__forceinline__ __device__ float quad_allreduce_sum(float x) {
  x += __shfl_xor_sync(0xffffffff, x, 2);
  return x + __shfl_xor_sync(0xffffffff, x, 1);
}

// 2^x in one MUFU instruction, flushing denormals: the libm exp2f adds range fix-ups that cost
// more than the exponential itself here, and results below 2^-126 are 0 to fp16/bf16 anyway.
__forceinline__ __device__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <int kRows>
struct OnlineSoftmax {
  float row_max[kRows];  // running max of raw scores; -inf while a row has seen no key
  float row_sum[kRows];  // this thread's partial sum of exp; reduced across the quad at the end

  __forceinline__ __device__ OnlineSoftmax() {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
    }
  }

  // Fold a new score tile into the running statistics: rescale the output accumulator by
  // exp(scale * (old max - new max)) and overwrite the scores with exp(scale * (s - new max)).
  // On the first tile the old max is -inf, so the correction is exp2(-inf) = 0 on an all-zero O.
  template <class TensorS, class TensorO>
  __forceinline__ __device__ void update(TensorS& acc_s, TensorO& acc_o, float scale_log2) {
    using namespace cute;
    Tensor scores = make_tensor(acc_s.data(), accumulator_as_rows_cols(acc_s.layout()));  // (rows, cols)
    Tensor out = make_tensor(acc_o.data(), accumulator_as_rows_cols(acc_o.layout()));     // (rows, head_dim)
    static_assert(decltype(size<0>(scores))::value == kRows);
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float tile_max = row_max[r];
      CUTE_UNROLL
      for (int c = 0; c < size<1>(scores); ++c) tile_max = fmaxf(tile_max, scores(r, c));
      const float new_max = quad_allreduce_max(tile_max);
      // A row that has seen only masked keys keeps max -inf; use 0 in the exponent so that
      // exp2(-inf - 0) = 0 instead of exp2(-inf + inf) = NaN.
      const float max_scaled = new_max == -INFINITY ? 0.0f : new_max * scale_log2;
      const float correction = fast_exp2(row_max[r] * scale_log2 - max_scaled);
      row_sum[r] *= correction;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(out); ++c) out(r, c) *= correction;
      row_max[r] = new_max;
      float sum = 0.0f;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(scores); ++c) {
        scores(r, c) = fast_exp2(scores(r, c) * scale_log2 - max_scaled);
        sum += scores(r, c);
      }
      row_sum[r] += sum;
    }
  }

  // Normalise the output rows and return, through `lse`, log(sum_j exp(scale * s_j)) per row.
  // `row_has_keys(r)` says whether row r sees any key (AttentionMask::row_sees_a_key): a row that
  // sees none gets O = 0 (assigned: a masked 0 times a non-finite v may sit in its accumulator) and
  // LSE -inf. A row that sees keys keeps the formula's non-finite results: a NaN or +inf score
  // makes its sum NaN (O and LSE NaN); every visible score -inf makes it 0, and 0/0 is NaN.
  template <class TensorO, class RowHasKeys>
  __forceinline__ __device__ void finalize(TensorO& acc_o, float softmax_scale, float (&lse)[kRows],
                                           RowHasKeys const& row_has_keys) {
    using namespace cute;
    Tensor out = make_tensor(acc_o.data(), accumulator_as_rows_cols(acc_o.layout()));
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const float sum = quad_allreduce_sum(row_sum[r]);
      const bool has_keys = row_has_keys(r);
      const float inv_sum = has_keys ? 1.0f / sum : 0.0f;
      lse[r] = !has_keys ? -INFINITY : sum == 0.0f ? NAN : row_max[r] * softmax_scale + logf(sum);
      CUTE_UNROLL
      for (int c = 0; c < size<1>(out); ++c) out(r, c) = has_keys ? out(r, c) * inv_sum : 0.0f;
    }
  }
};

}  // namespace flashcore::cuda
