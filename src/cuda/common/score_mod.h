// The score options softcap and ALiBi (attention.h), applied in a family's tile loop to the raw
// products q·k of an accumulator tile:
//   s = softcap * tanh(scale * q·k / softcap)      (or scale * q·k without softcap)
//       - slope * |i + seqlen_k - seqlen_q - j|    (ALiBi)
// after which the softmax runs with scale 1 (scale_log2 = log2(e)) and the LSE is in these units.
// The backward also needs d s / d (scale * q·k): 1 - tanh² with softcap, else 1.
//
// Kernels take it behind one compile-time switch (kHasScoreMod), so the plain kernels carry no
// code for it; within the score-mod kernels softcap and ALiBi are uniform runtime branches. Every
// factor is read from the kernel's __grid_constant__ params (constant-bank operands of the FMULs
// and FFMAs) rather than held in registers: the sm80 d = 64 forward already runs at 255 registers,
// and five live floats more cost it a hundred bytes of spills.
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

inline constexpr float kScoreModLog2e = 1.4426950408889634f;

struct ScoreMod {
  // The ALiBi slope of (batch, head); 0 without ALiBi.
  __forceinline__ __device__ static float slope(const ProblemParams& params, int batch, int head) {
    return params.alibi_slopes == nullptr ? 0.0f : params.alibi_slopes[batch * params.alibi_batch_stride + head];
  }

  // The softcap (or, without one, the softmax scale) over every entry of an accumulator tile:
  // qk -> softcap * tanh(qk * softmax_scale / softcap), or qk * softmax_scale. The backward then
  // takes d score / d (scale qk) = 1 - (s / softcap)² as fmaf(-s * s, softcap_inv_sq, 1), which is 1
  // without softcap (softcap_inv_sq = 0): no branch per element.
  template <class TensorAcc>
  __forceinline__ __device__ static void cap(const ProblemParams& params, TensorAcc& acc) {
    if (params.softcap > 0.0f) {
      CUTE_UNROLL
      for (int i = 0; i < cute::size(acc); ++i) acc(i) = params.softcap * fast_tanh(acc(i) * params.softcap_scale);
    } else {
      CUTE_UNROLL
      for (int i = 0; i < cute::size(acc); ++i) acc(i) *= params.softmax_scale;
    }
  }

  // ALiBi's bias of (row, col) of the full matrix (0 when slope is 0): to subtract from a capped score.
  __forceinline__ __device__ static float bias(const ProblemParams& params, float slope, int row, int col) {
    return slope * static_cast<float>(abs(row + params.seqlen_k - params.seqlen_q - col));
  }

  // Every entry of an accumulator tile; `coords` is the identity tensor of the tile partitioned
  // like the accumulator, (row0, col0) the tile's corner in the full matrix.
  template <class TensorAcc, class TensorCoord>
  __forceinline__ __device__ static void apply(const ProblemParams& params, float slope, TensorAcc& acc,
                                               TensorCoord const& coords, int row0, int col0) {
    cap(params, acc);
    if (slope != 0.0f) {
      const int shift = row0 + params.seqlen_k - params.seqlen_q - col0;
      CUTE_UNROLL
      for (int i = 0; i < cute::size(acc); ++i) {
        acc(i) -= slope * static_cast<float>(abs(cute::get<0>(coords(i)) - cute::get<1>(coords(i)) + shift));
      }
    }
  }
};

}  // namespace flashcore::cuda
