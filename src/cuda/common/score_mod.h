// The score options softcap and ALiBi (attention.h), applied in a family's tile loop to the raw
// products q·k of an accumulator tile. The score is
//   s = softcap * tanh(scale * q·k / softcap)      (or scale * q·k without softcap)
//       - slope * |i + seqlen_k - seqlen_q - j|    (ALiBi)
// and the option kernels keep it in units of params.score_unit (softcap, or without one the
// softmax scale), so that no pass spends a multiply per element on the unit:
//   softcap:     tile = tanh(q·k * softcap_scale)          one FMUL + one MUFU per element
//   no softcap:  tile = q·k                                nothing
//   ALiBi:       tile -= (slope / unit) * |d|              one FADD + one FFMA per element
// after which the softmax runs with scale score_unit (exp2 with score_unit_log2, one FFMA, as in
// the plain kernels) and the LSE is in natural units. The backward's d s / d (scale * q·k) is
// 1 - tanh² from the capped tile before the bias.
//
// ALiBi's |d| per element: the distance d of entry i of a thread's fragment is (a per-tile base
// for this thread) + (a compile-time constant of i), so it is formed in float: the base converted
// once per tile, the constant folded, |.| a free operand modifier. Converting d per element (I2F)
// runs at a quarter of the FMA rate, like the MUFU.
//
// Kernels take all of this behind their compile-time variant (common/kernel_variant.h: kScoreMod),
// so the plain and window-only kernels carry none of it; within the score-option kernels softcap
// and ALiBi are uniform branches per tile.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/params.h"

namespace flashcore::cuda {

// tanh in one MUFU instruction (sm_75+), as FlashAttention's softcap uses (max error about 2^-11
// relative, below bf16's and fp16's rounding of the scores' products).
__forceinline__ __device__ float fast_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

struct ScoreMod {
  // The ALiBi slope of (batch, head) in score units (slope / score_unit); 0 without ALiBi.
  __forceinline__ __device__ static float slope(const ProblemParams& params, int batch, int head) {
    return params.alibi_slopes == nullptr
               ? 0.0f
               : params.alibi_slopes[batch * params.alibi_batch_stride + head] * params.alibi_unit_scale;
  }

  // Softcap over every entry of an accumulator tile (nothing without one): qk -> tanh(qk *
  // softcap_scale), the score in units of softcap.
  template <class TensorAcc>
  __forceinline__ __device__ static void cap(const ProblemParams& params, TensorAcc& acc) {
    if (params.softcap > 0.0f) cap(params.softcap_scale, acc);
  }
  // The same for kernels that know softcap is on.
  template <class TensorAcc>
  __forceinline__ __device__ static void cap(float softcap_scale, TensorAcc& acc) {
    CUTE_UNROLL
    for (int i = 0; i < cute::size(acc); ++i) acc(i) = fast_tanh(acc(i) * softcap_scale);
  }

  // ALiBi over a tile: the thread's base distance (as float) and, per entry, the compile-time
  // offset from it. `coords` is the identity tensor of the tile partitioned like the accumulator,
  // (row0, col0) the tile's corner in the full matrix.
  struct Distance {
    float base;  // d of this thread's entry 0

    // diagonal: seqlen_k - seqlen_q of the sequence (AttentionMask::diagonal()).
    template <class TensorCoord>
    __forceinline__ __device__ Distance(int diagonal, TensorCoord const& coords, int row0, int col0)
        : base(static_cast<float>(row0 + cute::get<0>(coords(0)) + diagonal - col0 - cute::get<1>(coords(0)))) {}

    // |d| of entry `index` (a flat index, or (row, col) of a rows-cols view of the same
    // coordinates): (row_i - row_0) - (col_i - col_0) folds to a constant once the loop unrolls.
    template <class TensorCoord, class... Index>
    __forceinline__ __device__ float abs_at(TensorCoord const& coords, Index... index) const {
      const auto at = coords(index...);
      const auto first = coords(0);
      const int rel = (cute::get<0>(at) - cute::get<0>(first)) - (cute::get<1>(at) - cute::get<1>(first));
      return fabsf(base + static_cast<float>(rel));
    }
  };

  // The bias alone (a slope of 0 adds 0): for kernels that know ALiBi is on and softcap off.
  template <class TensorAcc, class TensorCoord>
  __forceinline__ __device__ static void bias(int diagonal, float slope, TensorAcc& acc, TensorCoord const& coords,
                                              int row0, int col0) {
    const Distance distance(diagonal, coords, row0, col0);
    CUTE_UNROLL
    for (int i = 0; i < cute::size(acc); ++i) acc(i) = fmaf(-slope, distance.abs_at(coords, i), acc(i));
  }

  template <class TensorAcc, class TensorCoord>
  __forceinline__ __device__ static void apply(const ProblemParams& params, int diagonal, float slope, TensorAcc& acc,
                                               TensorCoord const& coords, int row0, int col0) {
    cap(params, acc);
    if (slope != 0.0f) bias(diagonal, slope, acc, coords, row0, col0);
  }
};

}  // namespace flashcore::cuda
