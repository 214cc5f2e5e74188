// The attention options in the sm90 forward, by kernel variant (FwdVariant below): what a tile's
// mask, trip counts and scores are. The plain kernels (kPlain) get the causal/seqlen mask and raw
// scores with the softmax scale, as before, and no kernel argument; the window kernels (kWindow)
// get the sliding window, the score-option kernels (kScoreMod) the window, softcap and ALiBi, all
// as runtime data of the call (fwd_launch_template.h's run_fwd_options picks); at d128 the
// one-option kernels (kAlibi, kSoftcap) carry the window and one score option's code only, with no
// per-tile branch on it:
//   window   mask.h's trip counts (key blocks wholly outside the window are never loaded) and the
//            masked tiles' compares: the blocks at the window's left edge take the mask too;
//   softcap  tanh per score, ALiBi one FADD + FFMA per score (score_mod.h), each a uniform branch
//            per tile in kScoreMod; kSoftcap's scores are bounded (tanh <= 1), so in bf16 its
//            softmax needs no running max (fwd_softmax.h's FwdSoftmaxBounded);
//   units    scores in units of score_unit (score_mod.h), so the softmax's exp2 stays one FFMA and
//            the LSE comes out in natural units;
//   dropout  (every option kernel, a uniform branch per tile; a call with dropout and neither
//            softcap nor ALiBi runs the window kernel) the dropped entries of the converted 16-bit P
//            become 0 after the row sums (common/dropout.h's stream and element mapping, the
//            wgmma accumulator holding the mma.sync pattern: 16 rows a warp, 8-column groups),
//            and 1 / (1 - p) goes onto O once, before the epilogue.
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

#include "cuda/common/dropout.h"
#include "cuda/common/mask.h"
#include "cuda/common/score_mod.h"
#include "cuda/params.h"
#include "cuda/sm90/fragment.h"

namespace flashcore::cuda::sm90 {

// The sm90 forward's kernels: one per call need (common/kernel_variant.h) and, for calls with one
// score option at d128, a kernel with that option's code alone (kAlibi: ALiBi, kSoftcap: softcap;
// each with the window and dropout). The general kernel's every-option code and per-tile branches
// cost ~7 % on ALiBi calls (session 11, docs/tuning/forward_sm90_options.md).
enum class FwdVariant { kPlain, kWindow, kScoreMod, kAlibi, kSoftcap };

constexpr bool has_window(FwdVariant v) { return v != FwdVariant::kPlain; }
// Scores in score units (score_mod.h).
constexpr bool has_score_mod(FwdVariant v) { return v != FwdVariant::kPlain && v != FwdVariant::kWindow; }
constexpr bool has_softcap(FwdVariant v) { return v == FwdVariant::kScoreMod || v == FwdVariant::kSoftcap; }
constexpr bool has_alibi(FwdVariant v) { return v == FwdVariant::kScoreMod || v == FwdVariant::kAlibi; }

// The option kernels' extra kernel argument: the call's options (ProblemParams). Empty for the
// plain kernels, whose launch is unchanged.
template <FwdVariant kVariant>
struct FwdOptionArgs {
  ProblemParams problem;
  static FwdOptionArgs of(const ProblemParams& p) { return {p}; }
};
template <>
struct FwdOptionArgs<FwdVariant::kPlain> {
  static FwdOptionArgs of(const ProblemParams&) { return {}; }
};

// Softcap-only calls whose scores the bounded softmax takes (FwdSoftmaxBounded: the row max fixed
// at softcap): every exp(s - softcap) >= exp(-2 softcap) stays a normal float and a normal bf16
// (>= 2^-126, so softcap <= 43). fp16 P would flush such values (its normals end at 2^-14), so
// fp16 keeps the running max.
constexpr float kBoundedSoftcapMax = 40.0f;

// One tile's view of the options: built once per (m_block, head, batch) tile by the producer (trip
// counts) and each consumer thread (trip counts, scores).
template <class Traits, FwdVariant kVariant>
struct FwdScore {
  static constexpr bool kWindow = has_window(kVariant);
  static constexpr bool kScoreMod = has_score_mod(kVariant);
  // Tile entries are at most 1 (tanh), so the softmax may fix each row's max (bf16 only: see
  // kBoundedSoftcapMax; run_fwd_options sends larger softcaps to kScoreMod).
  static constexpr bool kBoundedScores =
      kVariant == FwdVariant::kSoftcap && std::is_same_v<typename Traits::Element, cutlass::bfloat16_t>;
  using Params = typename Traits::Params;

  AttentionMask mask;
  float scale_log2;  // exp2 factor of a raw tile entry: scale_log2 plain, score_unit_log2 with options
  float unit;        // natural-log factor of the row max in the LSE: softmax_scale or score_unit
  float slope;       // ALiBi slope in score units; 0 without ALiBi

  // Rows are counted in the tile grid's frame, row_offset rows above the sequence's first query
  // (see Params::row_offset): a mask over seqlen_q + row_offset rows has the same bottom-right
  // diagonal, window and ALiBi distances. Varlen: the tile's own sequence (fwd_sequence.h).
  __forceinline__ __device__ static AttentionMask mask_of(FwdSequence<Traits> const& seq,
                                                         [[maybe_unused]] FwdOptionArgs<kVariant> const& args) {
    AttentionMask mask{seq.seqlen_q + seq.row_offset, seq.seqlen_k, Traits::kIsCausal, -1, -1};
    if constexpr (kWindow) {
      mask.window_left = args.problem.window_left;
      mask.window_right = args.problem.window_right;
    }
    return mask;
  }

  __forceinline__ __device__ FwdScore(Params const& params, FwdSequence<Traits> const& seq,
                                      [[maybe_unused]] FwdOptionArgs<kVariant> const& args,
                                      [[maybe_unused]] int head, [[maybe_unused]] int batch)
      : mask(mask_of(seq, args)), scale_log2(params.scale_log2), unit(params.softmax_scale), slope(0.0f) {
    if constexpr (kScoreMod) {
      scale_log2 = args.problem.score_unit_log2;
      unit = args.problem.score_unit;
    }
    if constexpr (has_alibi(kVariant)) slope = ScoreMod::slope(args.problem, batch, head);
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

  // Softcap and ALiBi on a raw QK^T tile (nothing in the plain kernels); the mask comes after.
  template <class TensorS, class TensorC>
  __forceinline__ __device__ void apply([[maybe_unused]] FwdOptionArgs<kVariant> const& args,
                                        [[maybe_unused]] TensorS& tSrS, [[maybe_unused]] TensorC const& tScS,
                                        [[maybe_unused]] int row0, [[maybe_unused]] int col0) const {
    if constexpr (kVariant == FwdVariant::kScoreMod) {
      ScoreMod::apply(args.problem, mask.diagonal(), slope, tSrS, tScS, row0, col0);
    } else if constexpr (kVariant == FwdVariant::kAlibi) {
      ScoreMod::bias(mask.diagonal(), slope, tSrS, tScS, row0, col0);
    } else if constexpr (kVariant == FwdVariant::kSoftcap) {
      ScoreMod::cap(args.problem.softcap_scale, tSrS);
    }
  }

  // Dropout on the 16-bit P of one tile (register-A layout, S's element order: pair k = entries
  // (row h, columns 2q, 2q + 1 of 8-column group n) with k = h + 2 n). `query0` is the tile's first
  // row in its sequence's frame (the dropout stream counts real rows; Params::row_offset_mask keeps
  // each row_offset a multiple of 16 for dropout calls so that warps start on 16-row groups),
  // `col0` its first key.
  template <class TensorP, class TensorC>
  __forceinline__ __device__ void drop([[maybe_unused]] FwdOptionArgs<kVariant> const& args,
                                       [[maybe_unused]] TensorP& tOrP, [[maybe_unused]] TensorC const& tScS,
                                       [[maybe_unused]] int query0, [[maybe_unused]] int col0,
                                       [[maybe_unused]] int head, [[maybe_unused]] int batch) const {
    using namespace cute;
    if constexpr (kWindow) {
      if (args.problem.has_dropout) {
        using RowsCols = decltype(wgmma_acc_as_rows_cols(tScS.layout()));
        constexpr int kRowsS = decltype(size<0>(RowsCols{}))::value;
        constexpr int kColsS = decltype(size<1>(RowsCols{}))::value;
        static_assert(kRowsS == 2, "one 64-row wgmma slab per warpgroup");
        constexpr int kPairs = decltype(size(tOrP))::value / 2;
        Tensor pairs = make_tensor(make_rmem_ptr(reinterpret_cast<std::uint32_t*>(raw_pointer_cast(tOrP.data()))),
                                   make_layout(Int<kPairs>{}));
        const TileDropout dropout(args.problem, batch, head);
        dropout.zero_dropped_pairs<16, 8, kRowsS, kColsS>(pairs, query0 + get<0>(tScS(0)), col0 + get<1>(tScS(0)));
      }
    }
  }

  // O times 1 / (1 - p) (dropout's kept probabilities), once per tile, after the normalisation.
  template <class TensorO>
  __forceinline__ __device__ static void scale_output([[maybe_unused]] FwdOptionArgs<kVariant> const& args,
                                                      [[maybe_unused]] TensorO& tOrO) {
    if constexpr (kWindow) {
      if (args.problem.has_dropout) {
        CUTE_UNROLL
        for (int i = 0; i < cute::size(tOrO); ++i) tOrO(i) *= args.problem.dropout_scale;
      }
    }
  }
};

}  // namespace flashcore::cuda::sm90
