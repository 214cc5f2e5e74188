// Online softmax on wgmma accumulators, split into the steps the overlapped mainloop needs:
// the statistics and exponentials of S(j) run while O += P(j-1) V is still in flight, and O
// is rescaled only after that product has completed.
//
// Scores stay raw; exp(scale * (s - m)) = exp2(s * scale_log2 - m * scale_log2) costs one FFMA
// and one MUFU.EX2 per element, or with kExp2FmaEvery = k, one element in k is evaluated on the
// FMA pipe instead (common/exp2_fma.h: where the exponential ties with the tensor cores, d <= 64).
// Row sums stay per-thread until finalize() (quad-reduced once).
#pragma once

#include <cmath>

#include <cute/tensor.hpp>

#include "cuda/common/exp2_fma.h"
#include "cuda/common/softmax.h"
#include "cuda/sm90/fragment.h"

namespace flashcore::cuda::sm90 {

// Normalise the output rows by their sums and write each row's LSE = lse_base(r) + log(sum), the
// one rule of both softmaxes' finalize (lse_base: the row max in natural units, or a fixed bound).
// `row_has_keys(r)` says whether row r sees any key (AttentionMask::row_sees_a_key): a row that
// sees none gets O = 0 (assigned: a masked 0 times a non-finite v may sit in its accumulator) and
// LSE -inf. A row that sees keys keeps the formula's non-finite results: a NaN or +inf score
// makes its sum NaN (O and LSE NaN); every visible score -inf makes it 0, and 0/0 is NaN.
template <int kRows, class TensorO, class RowHasKeys, class LseBase>
__forceinline__ __device__ void normalize_rows(TensorO& acc_o, float const (&row_sum)[kRows], float (&lse)[kRows],
                                               RowHasKeys const& row_has_keys, LseBase const& lse_base) {
  using namespace cute;
  Tensor out = make_tensor(acc_o.data(), wgmma_acc_as_rows_cols(acc_o.layout()));
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const float sum = quad_allreduce_sum(row_sum[r]);
    const bool has_keys = row_has_keys(r);
    const float inv_sum = has_keys ? 1.0f / sum : 0.0f;
    lse[r] = !has_keys ? -INFINITY : sum == 0.0f ? NAN : lse_base(r) + logf(sum);
    CUTE_UNROLL
    for (int c = 0; c < size<1>(out); ++c) out(r, c) = has_keys ? out(r, c) * inv_sum : 0.0f;
  }
}

template <int kRows, int kExp2FmaEvery = 0>
struct FwdSoftmax {
  static_assert(kExp2FmaEvery >= 0);
  float row_max[kRows];  // running max of raw scores; -inf while a row has seen no key
  float row_sum[kRows];  // this thread's partial sum of exponentials

  __forceinline__ __device__ FwdSoftmax() {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
    }
  }

  // Fold a score tile into the statistics, overwrite it with its exponentials, and return the
  // factor exp(scale * (old max - new max)) by which O must be rescaled (0 while O is empty).
  template <class TensorS>
  __forceinline__ __device__ void online(TensorS& acc_s, float scale_log2, float (&correction)[kRows]) {
    using namespace cute;
    Tensor s = make_tensor(acc_s.data(), wgmma_acc_as_rows_cols(acc_s.layout()));  // (rows, cols)
    static_assert(decltype(size<0>(s))::value == kRows);
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float tile_max = row_max[r];
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) tile_max = fmaxf(tile_max, s(r, c));
      const float new_max = quad_allreduce_max(tile_max);
      // A row that has seen only masked keys keeps max -inf: use 0 in the exponent so that
      // exp2(-inf - 0) = 0 rather than exp2(-inf + inf) = NaN.
      const float max_scaled = new_max == -INFINITY ? 0.0f : new_max * scale_log2;
      correction[r] = fast_exp2(row_max[r] * scale_log2 - max_scaled);
      row_max[r] = new_max;
      float sum = 0.0f;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) {
        const float x = s(r, c) * scale_log2 - max_scaled;
        if constexpr (kExp2FmaEvery > 0) {
          s(r, c) = c % kExp2FmaEvery == kExp2FmaEvery - 1 ? exp2_fma(x) : fast_exp2(x);
        } else {
          s(r, c) = fast_exp2(x);
        }
        sum += s(r, c);
      }
      row_sum[r] = row_sum[r] * correction[r] + sum;
    }
  }

  template <class TensorO>
  __forceinline__ __device__ static void rescale(TensorO& acc_o, float const (&correction)[kRows]) {
    using namespace cute;
    Tensor o = make_tensor(acc_o.data(), wgmma_acc_as_rows_cols(acc_o.layout()));  // (rows, d)
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      CUTE_UNROLL
      for (int c = 0; c < size<1>(o); ++c) o(r, c) *= correction[r];
    }
  }

  // Normalise the output rows and return, through `lse`, log(sum_j exp(scale * s_j)) per row
  // (normalize_rows says what a row without keys, or with non-finite scores, gets).
  template <class TensorO, class RowHasKeys>
  __forceinline__ __device__ void finalize(TensorO& acc_o, float softmax_scale, float (&lse)[kRows],
                                           RowHasKeys const& row_has_keys) {
    normalize_rows<kRows>(acc_o, row_sum, lse, row_has_keys, [&](int r) { return row_max[r] * softmax_scale; });
  }
};

// The softmax of scores known to be at most 1 in tile units (the softcap kernel's tanh, in units of
// softcap): each row's max is fixed at that bound, so there is no running max, no cross-lane max,
// no correction and no O rescale; exp2(s * scale_log2 - scale_log2) is one FFMA and one MUFU.EX2
// as before. The exponentials are then exp(score - softcap) >= exp(-2 softcap) in natural units:
// normal floats and normal bf16 for softcap <= kBoundedSoftcapMax (fwd_score_options.h), and each
// is as precise relative to itself as with the running max. The LSE is softcap + log(sum).
template <int kRows, int kExp2FmaEvery = 0>
struct FwdSoftmaxBounded {
  static_assert(kExp2FmaEvery >= 0);
  float row_sum[kRows];  // this thread's partial sum of exponentials

  __forceinline__ __device__ FwdSoftmaxBounded() {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) row_sum[r] = 0.0f;
  }

  // FwdSoftmax::online's interface; `correction` is left alone (rescale() does nothing).
  template <class TensorS>
  __forceinline__ __device__ void online(TensorS& acc_s, float scale_log2, float (&)[kRows]) {
    using namespace cute;
    Tensor s = make_tensor(acc_s.data(), wgmma_acc_as_rows_cols(acc_s.layout()));  // (rows, cols)
    static_assert(decltype(size<0>(s))::value == kRows);
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float sum = 0.0f;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) {
        const float x = fmaf(s(r, c), scale_log2, -scale_log2);
        if constexpr (kExp2FmaEvery > 0) {
          s(r, c) = c % kExp2FmaEvery == kExp2FmaEvery - 1 ? exp2_fma(x) : fast_exp2(x);
        } else {
          s(r, c) = fast_exp2(x);
        }
        sum += s(r, c);
      }
      row_sum[r] += sum;
    }
  }

  template <class TensorO>
  __forceinline__ __device__ static void rescale(TensorO&, float const (&)[kRows]) {}

  // FwdSoftmax::finalize with the fixed max: `unit` is the bound in natural units (softcap).
  template <class TensorO, class RowHasKeys>
  __forceinline__ __device__ void finalize(TensorO& acc_o, float unit, float (&lse)[kRows],
                                           RowHasKeys const& row_has_keys) {
    normalize_rows<kRows>(acc_o, row_sum, lse, row_has_keys, [&](int) { return unit; });
  }
};

}  // namespace flashcore::cuda::sm90
