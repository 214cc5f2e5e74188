// The attention options in the sm90 forward, by kernel variant (common/kernel_variant.h): what a
// tile's mask, trip counts and scores are. The plain kernels (kPlain) get the causal/seqlen mask
// and raw scores with the softmax scale, as before, and no kernel argument; the window kernels
// (kWindow) get the sliding window, the score-option kernels (kScoreMod) the window, softcap and
// ALiBi, all as runtime data of the call (fwd_launch_template.h's run_fwd_options picks):
//   window   mask.h's trip counts (key blocks wholly outside the window are never loaded) and the
//            masked tiles' compares: the blocks at the window's left edge take the mask too;
//   softcap  tanh per score, ALiBi one FADD + FFMA per score (score_mod.h), each a uniform branch
//            per tile;
//   units    scores in units of score_unit (score_mod.h), so the softmax's exp2 stays one FFMA and
//            the LSE comes out in natural units.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/common/kernel_variant.h"
#include "cuda/common/mask.h"
#include "cuda/common/score_mod.h"
#include "cuda/params.h"
#include "cuda/sm90/fragment.h"

namespace flashcore::cuda::sm90 {

// The option kernels' extra kernel argument: the call's options (ProblemParams). Empty for the
// plain kernels, whose launch is unchanged.
template <KernelVariant kVariant>
struct FwdOptionArgs {
  static FwdOptionArgs of(const ProblemParams&) { return {}; }
};
template <>
struct FwdOptionArgs<KernelVariant::kWindow> {
  ProblemParams problem;
  static FwdOptionArgs of(const ProblemParams& p) { return {p}; }
};
template <>
struct FwdOptionArgs<KernelVariant::kScoreMod> {
  ProblemParams problem;
  static FwdOptionArgs of(const ProblemParams& p) { return {p}; }
};

// One tile's view of the options: built once per (m_block, head, batch) tile by the producer (trip
// counts) and each consumer thread (trip counts, scores).
template <class Traits, KernelVariant kVariant>
struct FwdScore {
  static constexpr bool kWindow = has_window(kVariant);
  static constexpr bool kScoreMod = has_score_mod(kVariant);
  using Params = typename Traits::Params;

  AttentionMask mask;
  float scale_log2;  // exp2 factor of a raw tile entry: scale_log2 plain, score_unit_log2 with options
  float unit;        // natural-log factor of the row max in the LSE: softmax_scale or score_unit
  float slope;       // ALiBi slope in score units; 0 without ALiBi

  // Rows are counted in the tile grid's frame, row_offset rows above the real first query (see
  // Params::row_offset): a mask over seqlen_q + row_offset rows has the same bottom-right
  // diagonal, window and ALiBi distances.
  __forceinline__ __device__ static AttentionMask mask_of(Params const& params,
                                                         [[maybe_unused]] FwdOptionArgs<kVariant> const& args) {
    AttentionMask mask{params.seqlen_q + params.row_offset, params.seqlen_k, Traits::kIsCausal, -1, -1};
    if constexpr (kWindow) {
      mask.window_left = args.problem.window_left;
      mask.window_right = args.problem.window_right;
    }
    return mask;
  }

  __forceinline__ __device__ FwdScore(Params const& params, [[maybe_unused]] FwdOptionArgs<kVariant> const& args,
                                      [[maybe_unused]] int head, [[maybe_unused]] int batch)
      : mask(mask_of(params, args)), scale_log2(params.scale_log2), unit(params.softmax_scale), slope(0.0f) {
    if constexpr (kScoreMod) {
      scale_log2 = args.problem.score_unit_log2;
      unit = args.problem.score_unit;
      slope = ScoreMod::slope(args.problem, batch, head);
    }
  }

  // Key blocks [n_begin, n_end) hold every key the query block may see; blocks outside
  // [n_unmasked_begin, n_unmasked) need the mask (mask.h). Without a window n_begin and
  // n_unmasked_begin are 0.
  struct TripCounts {
    int n_begin, n_end, n_unmasked_begin, n_unmasked;
    __forceinline__ __device__ bool needs_mask(int n) const { return n >= n_unmasked || n < n_unmasked_begin; }
  };
  __forceinline__ __device__ TripCounts trip_counts(int m_block) const { return trip_counts(mask, m_block); }
  __forceinline__ __device__ static TripCounts trip_counts(AttentionMask const& mask, int m_block) {
    constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN;
    return {kWindow ? mask.n_block_begin(m_block, kBlockM, kBlockN) : 0, mask.n_block_end(m_block, kBlockM, kBlockN),
            kWindow ? mask.n_block_unmasked_begin(m_block, kBlockM, kBlockN) : 0,
            mask.n_block_unmasked(m_block, kBlockM, kBlockN)};
  }

  // A raw QK^T tile (corner (row0, col0)) to probabilities, the softmax statistics updated: the
  // scores, the mask where `masked`, the online softmax. The plain and window kernels: the mask and
  // FwdSoftmax::online, nothing else. The score-option kernels (online_options):
  //   softcap alone, unmasked tile: the tile stays raw (the max on raw products, tanh in the
  //     exponent's chain);
  //   otherwise the tanh first, then ALiBi (alibi() below), then the mask (after: tanh(-inf) = -1).
  template <class Softmax, class TensorS, class TensorC>
  __forceinline__ __device__ void to_probs([[maybe_unused]] FwdOptionArgs<kVariant> const& args, TensorS& tSrS,
                                           TensorC const& tScS, int row0, int col0, bool masked, Softmax& softmax,
                                           float (&correction)[Softmax::kRowCount]) const {
    if constexpr (!kScoreMod) {
      if (masked) mask.apply(tSrS, tScS, row0, col0);
      softmax.online(tSrS, scale_log2, correction);
    } else {
      const ProblemParams& problem = args.problem;
      float row_offset[Softmax::kRowCount];
      CUTE_UNROLL
      for (int r = 0; r < Softmax::kRowCount; ++r) row_offset[r] = 0.0f;
      const bool softcap = problem.softcap > 0.0f;
      const bool raw_cap = softcap && slope == 0.0f && !masked;
      if (softcap && !raw_cap) ScoreMod::cap(problem, tSrS);
      if (slope != 0.0f) alibi(tSrS, tScS, row0, col0, row_offset);
      if (masked) mask.apply(tSrS, tScS, row0, col0);
      if (softcap) {
        softmax.template online_options<true>(tSrS, scale_log2, row_offset, raw_cap ? problem.softcap_scale : 0.0f,
                                              correction);
      } else {
        softmax.template online_options<false>(tSrS, scale_log2, row_offset, 0.0f, correction);
      }
    }
  }

  // ALiBi's bias -slope * |d|, d = i + diagonal - j, on a tile. On a tile wholly on one side of the
  // diagonal (every d >= 0, as every unmasked causal tile, or every d <= 0) |d| = sign * d, and
  // with d = D_r + k(r, c) (D_r this thread's row r at its first column, k a compile-time constant
  // once the loops unroll) the bias splits into -slope * sign * D_r, one float a row returned in
  // `row_offset` for the softmax to add to the row, and -slope * sign * k: one FFMA a score with
  // an immediate. Tiles across the diagonal: |d| per score (score_mod.h, FADD + FFMA).
  template <class TensorS, class TensorC, int kRows>
  __forceinline__ __device__ void alibi(TensorS& tSrS, TensorC const& tScS, int row0, int col0,
                                        float (&row_offset)[kRows]) const {
    using namespace cute;
    constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN;
    const int diagonal = mask.diagonal();
    const int d_min = row0 + diagonal - (col0 + kBlockN - 1);  // its top-right corner
    const int d_max = row0 + kBlockM - 1 + diagonal - col0;    // its bottom-left corner
    if (d_min >= 0 || d_max <= 0) {
      const float neg_slope_sign = d_min >= 0 ? -slope : slope;
      Tensor s = make_tensor(tSrS.data(), wgmma_acc_as_rows_cols(tSrS.layout()));  // (rows, cols)
      Tensor c = make_tensor(tScS.data(), wgmma_acc_as_rows_cols(tScS.layout()));  // (rows, cols) -> coords
      static_assert(decltype(size<0>(s))::value == kRows);
      const int col_first = get<1>(c(0, 0));
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const int row_r = get<0>(c(r, 0));
        row_offset[r] = neg_slope_sign * static_cast<float>(row0 + row_r + diagonal - col0 - col_first);
        CUTE_UNROLL
        for (int j = 0; j < size<1>(s); ++j) {
          const int k = (get<0>(c(r, j)) - row_r) - (get<1>(c(r, j)) - col_first);
          s(r, j) = fmaf(neg_slope_sign, static_cast<float>(k), s(r, j));
        }
      }
    } else {
      const ScoreMod::Distance distance(diagonal, tScS, row0, col0);
      CUTE_UNROLL
      for (int i = 0; i < size(tSrS); ++i) tSrS(i) = fmaf(-slope, distance.abs_at(tScS, i), tSrS(i));
    }
  }
};

}  // namespace flashcore::cuda::sm90
