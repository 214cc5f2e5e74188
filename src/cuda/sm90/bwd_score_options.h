// The score options of the sm90 backward's option kernels (Traits::kScoreOptions; generate.py's sm90
// bwd variant "options"): sliding window, softcap and ALiBi in a consumer step's recomputed Sᵀ.
//
// The window is the mask's (common/mask.h): bwd_mainloop.h's block_at() sweeps only the query
// blocks [m_block_min, m_block_max) that see the key block, so a 1k window over 16k keys costs
// about a window's work, and only tiles crossing the window's edges are masked. Softcap and ALiBi
// follow common/score_mod.h's units (the score in units of params.score_unit):
//   capped = tanh(q·k * softcap_scale)   (softcap; else capped = q·k)
//   score  = capped - (slope / unit) * |i + seqlen_k - seqlen_q - j|
//   Pᵀ     = exp2(score * score_unit_log2 - lse_log2)
//   dSᵀ    = Pᵀ ∘ (dPᵀ - D) ∘ (1 - capped²)   (softcap; the epilogue's and the dQ conversion's
//                                              softmax_scale completes d score / d (q·k))
// Without a softcap Pᵀ is formed under the dPᵀ product as in the plain kernels. With one, only the
// tanh runs there and Pᵀ and dSᵀ are formed together once dPᵀ has landed: holding 1 - capped²
// across the wait would take another 32 registers a consumer thread.
//
// Softcap, ALiBi and "the tile needs a mask" are uniform runtime branches per step, each branch a
// loop of its own, so a window-only step runs the plain kernel's loop (a mask on edge tiles only).
//
// The thread's accumulator entries are (key, query) pairs of the Sᵀ tile (tScS, the identity tensor
// partitioned like Sᵀ); ALiBi's distance of entry i is a per-step base of the thread plus a
// compile-time constant of i (the same fold as ScoreMod::Distance, transposed).
#pragma once

#include <cmath>
#include <cstdint>

#include <cute/tensor.hpp>

#include "cuda/common/mask.h"
#include "cuda/common/score_mod.h"  // fast_tanh

namespace flashcore::cuda::sm90 {

// Only the per-head slope lives in registers across a step; the window, softcap and unit are read
// from the kernel's parameters (constant memory) where they are used: held in registers across the
// consumer's loop they made ptxas spill (the consumers run at 240 of 240).
template <int kBlockM, int kBlockN, class Params>
struct BwdScoreOptions {
  Params const& params;
  AttentionMask mask;  // the sequence's lengths and causality with the window
  float slope;         // ALiBi's slope of the query head in score units; 0: no ALiBi
  __forceinline__ __device__ bool softcap() const { return params.softcap > 0.0f; }

  // `lengths`: the block's mask without the window (the mainloop's). `enabled` false (the kernels
  // without kScoreOptions, which never use this object): no option, nothing read.
  __forceinline__ __device__ BwdScoreOptions(Params const& params_, AttentionMask const& lengths, int batch, int head,
                                             bool enabled = true)
      : params(params_),
        mask{lengths.seqlen_q, lengths.seqlen_k, lengths.causal, enabled ? params_.window_left : -1,
             enabled ? params_.window_right : -1},
        slope(!enabled || params_.alibi_slopes == nullptr
                  ? 0.0f
                  : params_.alibi_slopes[batch * params_.alibi_batch_stride + head] * params_.alibi_unit_scale) {}

  // |query + diagonal - key| of entry i of tile (m0, n0), as float: base + a folded constant.
  template <class TensorCoord>
  __forceinline__ __device__ float base_distance(TensorCoord const& tScS, int m0, int n0) const {
    return static_cast<float>(m0 + cute::get<1>(tScS(0)) + mask.diagonal() - n0 - cute::get<0>(tScS(0)));
  }
  template <class TensorCoord>
  __forceinline__ __device__ static float abs_distance(float base, TensorCoord const& tScS, int i) {
    const int rel = (cute::get<1>(tScS(i)) - cute::get<1>(tScS(0))) - (cute::get<0>(tScS(i)) - cute::get<0>(tScS(0)));
    return fabsf(base + static_cast<float>(rel));
  }

  // Pᵀ from the score `s` of entry i (ALiBi's bias, the mask, the exponential).
  template <bool kMasked, bool kAlibi, class TensorCoord, class Exp2>
  __forceinline__ __device__ float probability(float s, float base, TensorCoord const& tScS, int i, float lse_log2,
                                               int m0, int n0, Exp2 const& exp2_of) const {
    if constexpr (kAlibi) s = fmaf(-slope, abs_distance(base, tScS, i), s);
    const float x = s * params.score_unit_log2 - lse_log2;
    if constexpr (kMasked) {
      return exp2_of(mask.visible(m0 + cute::get<1>(tScS(i)), n0 + cute::get<0>(tScS(i))) ? x : -INFINITY);
    } else {
      return exp2_of(x);
    }
  }

  template <bool kMasked, bool kAlibi, class TensorS, class TensorCoord, class Exp2>
  __forceinline__ __device__ void probabilities_of(TensorS& tSrS, TensorCoord const& tScS, float const* lse, int m0,
                                                   int n0, Exp2 const& exp2_of) const {
    const float base = kAlibi ? base_distance(tScS, m0, n0) : 0.0f;
    CUTE_UNROLL
    for (int i = 0; i < cute::size(tSrS); ++i) {
      tSrS(i) = probability<kMasked, kAlibi>(tSrS(i), base, tScS, i, lse[cute::get<1>(tScS(i))], m0, n0, exp2_of);
    }
  }

  // Step 2 (under dPᵀ): Pᵀ into tSrS, or with a softcap the capped scores only.
  template <class TensorS, class TensorCoord, class Exp2>
  __forceinline__ __device__ void scores(TensorS& tSrS, TensorCoord const& tScS, float const* lse, int m0, int n0,
                                         Exp2 const& exp2_of) const {
    if (softcap()) {
      CUTE_UNROLL
      for (int i = 0; i < cute::size(tSrS); ++i) tSrS(i) = fast_tanh(tSrS(i) * params.softcap_scale);
      return;
    }
    const bool masked = mask.tile_needs_mask(m0, n0, kBlockM, kBlockN);
    if (slope != 0.0f) {
      if (masked) {
        probabilities_of<true, true>(tSrS, tScS, lse, m0, n0, exp2_of);
      } else {
        probabilities_of<false, true>(tSrS, tScS, lse, m0, n0, exp2_of);
      }
    } else if (masked) {
      probabilities_of<true, false>(tSrS, tScS, lse, m0, n0, exp2_of);
    } else {
      probabilities_of<false, false>(tSrS, tScS, lse, m0, n0, exp2_of);
    }
  }

  template <bool kMasked, bool kAlibi, class TensorS, class TensorDP, class TensorCoord, class Exp2>
  __forceinline__ __device__ void capped_gradients_of(TensorS& tSrS, TensorDP& tdPrdP, TensorCoord const& tScS,
                                                      float const* lse, float const* dsum, int m0, int n0,
                                                      Exp2 const& exp2_of) const {
    const float base = kAlibi ? base_distance(tScS, m0, n0) : 0.0f;
    CUTE_UNROLL
    for (int i = 0; i < cute::size(tSrS); ++i) {
      const int query = cute::get<1>(tScS(i));
      const float capped = tSrS(i);
      const float p = probability<kMasked, kAlibi>(capped, base, tScS, i, lse[query], m0, n0, exp2_of);
      tdPrdP(i) = p * (tdPrdP(i) - dsum[query]) * fmaf(-capped, capped, 1.0f);
      tSrS(i) = p;
    }
  }

  // Step 3 (dPᵀ landed): dSᵀ into tdPrdP; with a softcap also Pᵀ into tSrS.
  template <class TensorS, class TensorDP, class TensorCoord, class Exp2>
  __forceinline__ __device__ void gradients(TensorS& tSrS, TensorDP& tdPrdP, TensorCoord const& tScS, float const* lse,
                                            float const* dsum, int m0, int n0, Exp2 const& exp2_of) const {
    if (softcap()) {
      const bool masked = mask.tile_needs_mask(m0, n0, kBlockM, kBlockN);
      if (slope != 0.0f) {
        if (masked) {
          capped_gradients_of<true, true>(tSrS, tdPrdP, tScS, lse, dsum, m0, n0, exp2_of);
        } else {
          capped_gradients_of<false, true>(tSrS, tdPrdP, tScS, lse, dsum, m0, n0, exp2_of);
        }
      } else if (masked) {
        capped_gradients_of<true, false>(tSrS, tdPrdP, tScS, lse, dsum, m0, n0, exp2_of);
      } else {
        capped_gradients_of<false, false>(tSrS, tdPrdP, tScS, lse, dsum, m0, n0, exp2_of);
      }
      return;
    }
    CUTE_UNROLL
    for (int i = 0; i < cute::size(tdPrdP); ++i) tdPrdP(i) = tSrS(i) * (tdPrdP(i) - dsum[cute::get<1>(tScS(i))]);
  }
};

}  // namespace flashcore::cuda::sm90
