// Compile-time description of one sm90 backward kernel: tiles, warp roles, the four wgmma
// TiledMmas, GMMA-swizzled shared-memory layouts (and their transposed views), TMA copy types,
// shared storage and kernel parameters.
//
// The products, per query block (M = kBlockM queries) of the CTA's key block (N = kBlockN keys):
//   Sᵀ  = K Qᵀ      (N x M, K = d)   SS, K and Q K-major.              Warpgroup w: keys [64w, 64w+64).
//   dPᵀ = V dOᵀ     (N x M, K = d)   SS, V and dO K-major.             Same split.
//   dV += Pᵀ dO     (N x d, K = M)   RS: Pᵀ from Sᵀ's registers, dO read MN-major (transposed view).
//   dK += dSᵀ Q     (N x d, K = M)   RS: dSᵀ from dPᵀ's registers, Q read MN-major.
//   dQ  = dS K      (M x d, K = N)   SS: dS from smem (stored there m-contiguous = MN-major A), K
//                                    read MN-major. Warpgroup w: columns [w d/2, (w+1) d/2).
// Computing the transposes (FA3's SdP_swapAB) keeps Pᵀ and dSᵀ in the register layout the dV and
// dK products take as their A operand: no smem round trip for P at all, and one for dS (dQ).
#pragma once

#ifndef CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#endif

#include <cstdint>
#include <type_traits>

#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/tensor.hpp>
#include <cutlass/gemm/collective/builders/sm90_common.inl>

#include "cuda/sm90/pipeline.h"

namespace flashcore::cuda::sm90 {

// kDsStsm_: dSᵀ goes to smem by stmatrix (4 STSM a thread at d128; off: 32 generic 16-bit stores).
// kDqFirst_: dQ = dS K is issued before dK += dSᵀ Q, and the dQ partial leaves (staging + bulk
//   reduce-add) while dK is still on the tensor cores (off: after both have retired).
// kDqWriter_: the dQ partial leaves through the producer warpgroup's warp 1 (bwd_dq_writer.h): the
//   consumers only stage it (off: each consumer warp issues its own bulk reduce-add, bwd_dq_accum.h).
// kDropout_: the dropout kernels (bwd_dropout.h): the keep bits drawn again each step, through
//   4 kBlockM words of shared memory per consumer warpgroup. The plain kernels carry none of it.
// kScoreOptions_: the score-option kernels (bwd_score_options.h): sliding window (query-block range
//   and mask), softcap and ALiBi in the recomputed scores, as runtime data. Not with kDropout_.
// kTailLongestFirst_: causal, default mode, dense: the grid's last rows take their longest sweeps
//   first (bwd_tile_order.h: bwd_tile_tail_longest_first; Params::tail_units, from bwd_tail_units);
//   off: each (kv head, batch) row key block 0 first, the rows one after another.
template <typename Element_, int kHeadDim_, int kBlockM_, int kBlockN_, int kStages_, bool kIsCausal_,
          bool kDsStsm_ = false, bool kDqFirst_ = false, bool kDqWriter_ = false, bool kDropout_ = false,
          bool kScoreOptions_ = false, bool kTailLongestFirst_ = false>
struct BwdTraits {
  using Element = Element_;
  using ElementAccum = float;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  static constexpr bool kIsCausal = kIsCausal_;
  static constexpr bool kDsStsm = kDsStsm_;
  static constexpr bool kDqFirst = kDqFirst_;
  static constexpr bool kDqWriter = kDqWriter_;
  static constexpr bool kDropout = kDropout_;
  static constexpr bool kScoreOptions = kScoreOptions_;
  static_assert(!(kDropout && kScoreOptions), "dropout with a score option runs on the sm80 backward");
  static constexpr bool kTailLongestFirst = kTailLongestFirst_ && kIsCausal_;

  // Warp roles: warpgroup 0 is the producer (one elected lane of warp 0 issues every TMA and bulk
  // copy), warpgroups 1.. are consumers, each owning 64 keys of the block.
  static constexpr int kConsumerWGs = kBlockN / 64;
  static_assert(kBlockN % 64 == 0 && kConsumerWGs == 2, "the dQ split and register budget assume 2 warpgroups");
  static constexpr int kConsumerThreads = kConsumerWGs * 128;
  static constexpr int kConsumerWarps = kConsumerThreads / 32;
  static constexpr int kThreads = kConsumerThreads + 128;
  // setmaxnreg moves registers within what the CTA was launched with (168 a thread, 384 threads):
  // 128 * (24 + 2 * 240) = 168 * 384. A producer at 32 leaves the consumers' setmaxnreg.inc waiting
  // for registers that never come (dev variant 11 of device run 10 hung so).
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static_assert(128 * (kProducerRegs + kConsumerWGs * kConsumerRegs) <= 168 * kThreads);

  using WG = cute::_64;
  using AtomLayoutKeys = cute::Layout<cute::Shape<cute::Int<kConsumerWGs>, cute::_1, cute::_1>>;  // WGs along keys
  using AtomLayoutDq = cute::Layout<cute::Shape<cute::_1, cute::Int<kConsumerWGs>, cute::_1>>;    // WGs along d

  using TiledMmaSdP = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, ElementAccum,
                                 cute::Shape<WG, cute::Int<kBlockM>, cute::Int<kHeadDim>>>(),
      AtomLayoutKeys{}));
  using TiledMmadKV = decltype(cute::make_tiled_mma(
      cute::GMMA::rs_op_selector<Element, Element, ElementAccum,
                                 cute::Shape<WG, cute::Int<kHeadDim>, cute::Int<kBlockM>>, cute::GMMA::Major::K,
                                 cute::GMMA::Major::MN>(),
      AtomLayoutKeys{}));
  using TiledMmadQ = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, ElementAccum,
                                 cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim / kConsumerWGs>, cute::Int<kBlockN>>,
                                 cute::GMMA::Major::MN, cute::GMMA::Major::MN>(),
      AtomLayoutDq{}));
  static_assert(cute::size<1>(typename TiledMmaSdP::Shape_MNK{}) == kBlockM, "Sᵀ wgmma narrower than kBlockM");
  static_assert(cute::size<1>(typename TiledMmadKV::Shape_MNK{}) == kHeadDim, "dK/dV wgmma narrower than d");

  using ShapeSdP = cute::Shape<cute::Int<kBlockN>, cute::Int<kBlockM>>;   // (N, M): Sᵀ, dPᵀ
  using ShapedKV = cute::Shape<cute::Int<kBlockN>, cute::Int<kHeadDim>>;  // (N, d): dK, dV
  using ShapedQ = cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>>;   // (M, d): dQ
  // dQ values per consumer thread (the dq_accum run layout of common/dq_accumulate.h).
  static constexpr int kDqFragElems = kBlockM * kHeadDim / kConsumerThreads;
  // TiledMmadQ's accumulator is (query, d): bwd_convert_dq.h reads the fragment's coordinates so.
  static constexpr bool kDqTransposed = false;

  // K-major tiles as TMA writes them (d contiguous).
  using SmemLayoutAtomQ = decltype(cutlass::gemm::collective::detail::ss_smem_selector<
                                   cute::GMMA::Major::K, Element, cute::Int<kBlockM>, cute::Int<kHeadDim>>());
  using SmemLayoutQ = decltype(cute::tile_to_shape(
      SmemLayoutAtomQ{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>, cute::Int<kStages>>{}));  // (M, d, stage)
  // K is also the MN-major B operand of dQ = dS K, split in d/2-column halves between the
  // warpgroups: a half must be a multiple of the transposed view's swizzle atom or divide it.
  // The selector's atom is 64 elements for d % 64 == 0, else 32; d = 96 (halves of 48 on 32-wide
  // atoms) takes 32-byte swizzling (16-element atoms) instead.
  static constexpr int kSelectorAtomK = kHeadDim % 64 == 0 ? 64 : (kHeadDim % 32 == 0 ? 32 : 16);
  static constexpr int kDqHalf = kHeadDim / kConsumerWGs;
  static constexpr bool kSelectorAtomKFits = kDqHalf % kSelectorAtomK == 0 || kSelectorAtomK % kDqHalf == 0;
  using SmemLayoutAtomK = std::conditional_t<
      kSelectorAtomKFits,
      decltype(cutlass::gemm::collective::detail::ss_smem_selector<cute::GMMA::Major::K, Element,
                                                                   cute::Int<kBlockN>, cute::Int<kHeadDim>>()),
      cute::GMMA::Layout_K_SW32_Atom<Element>>;
  using SmemLayoutK = decltype(cute::tile_to_shape(SmemLayoutAtomK{},
                                                   cute::Shape<cute::Int<kBlockN>, cute::Int<kHeadDim>>{}));  // (N, d)
  // The same bytes seen transposed (d contiguous = MN-major B operands).
  using SmemLayoutQt = decltype(cute::composition(
      SmemLayoutQ{}, cute::make_layout(cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockM>, cute::Int<kStages>>{},
                                       cute::Stride<cute::Int<kBlockM>, cute::_1, cute::Int<kBlockM * kHeadDim>>{})));  // (d, M, stage)
  using SmemLayoutKt = decltype(cute::composition(
      SmemLayoutK{}, cute::make_layout(cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockN>>{},
                                       cute::Stride<cute::Int<kBlockN>, cute::_1>{})));  // (d, N)
  // dS, stored by the consumers with queries contiguous: the MN-major A operand of dQ = dS K.
  // Two buffers (bwd_tile_size.h).
  using SmemLayoutAtomdS = decltype(cutlass::gemm::collective::detail::ss_smem_selector<
                                    cute::GMMA::Major::MN, Element, cute::Int<kBlockM>, cute::Int<kBlockN>>());
  using SmemLayoutdS = decltype(cute::tile_to_shape(
      SmemLayoutAtomdS{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kBlockN>, cute::_2>{}));  // (M, N, buf)
  using SmemLayoutdSt = decltype(cute::composition(
      SmemLayoutdS{}, cute::make_layout(cute::Shape<cute::Int<kBlockN>, cute::Int<kBlockM>, cute::_2>{},
                                        cute::Stride<cute::Int<kBlockM>, cute::_1, cute::Int<kBlockM * kBlockN>>{})));  // (N, M, buf)

  // Global tensors as TMA sees them: (seqlen, d, head, batch), d contiguous.
  using ShapeQKV = cute::Shape<int32_t, int32_t, int32_t, int32_t>;
  using StrideQKV = cute::Stride<int64_t, cute::_1, int64_t, int64_t>;
  using GmemTensor = decltype(cute::make_tensor(cute::make_gmem_ptr(static_cast<Element const*>(nullptr)),
                                                ShapeQKV{}, StrideQKV{}));
  using TmaQdO = decltype(cute::make_tma_copy(cute::SM90_TMA_LOAD{}, GmemTensor{},
                                              cute::take<0, 2>(SmemLayoutQ{}),
                                              cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>>{}, cute::_1{}));
  using TmaKV = decltype(cute::make_tma_copy(cute::SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutK{},
                                             cute::Shape<cute::Int<kBlockN>, cute::Int<kHeadDim>>{}, cute::_1{}));
  // Bytes one load of each kind delivers (out-of-bounds elements are zero-filled and counted).
  static constexpr uint32_t kBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesKV = kBlockN * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesRowStat = kBlockM * sizeof(float);  // lse_log2 or dsum of a query block
  // Dropout: each consumer warpgroup's Philox words of one step (bwd_dropout.h): 4 kBlockM draws
  // x 4 words. An empty base of SharedStorage in the other kernels (no bytes, no layout change).
  struct NoDropoutWords {};
  struct DropoutWords {
    cute::array_aligned<uint32_t, kConsumerWGs * 16 * kBlockM, 128> dropout_words;  // (draw, word, warpgroup)
  };

  struct SharedStorage : std::conditional_t<kDropout, DropoutWords, NoDropoutWords> {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>, 1024> k;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>, 1024> v;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>, 1024> q;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>, 1024> d_o;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutdS>, 1024> ds;
    cute::array_aligned<float, kConsumerThreads * kDqFragElems, 128> dq_stage;  // per-warp runs
    cute::array_aligned<float, kBlockM * kStages, 128> lse_log2;                // (M, stage)
    cute::array_aligned<float, kBlockM * kStages, 128> dsum;                    // (M, stage)
    alignas(16) uint64_t barrier_kv;  // K and V of the block have landed
    uint64_t barrier_kv_empty;        // every consumer warp is done with them (one arrival each)
    TmaPipelineStorage<kStages> pipeline_q;   // Q + lse_log2
    TmaPipelineStorage<kStages> pipeline_do;  // dO + dsum
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));
  static_assert(kSmemBytes <= 227 * 1024, "tile does not fit in shared memory");

  struct Params {
    TmaQdO tma_q;
    TmaQdO tma_do;
    TmaKV tma_k;
    TmaKV tma_v;
    ShapeQKV shape_q;  // (seqlen_q, head_dim, heads_q, batch)
    ShapeQKV shape_k;  // (seqlen_k, head_dim, heads_kv, batch)
    float const* lse_log2;  // (batch, heads_q, seqlen_q_rounded)
    float const* dsum;      // same
    float* dq_accum;        // (batch, heads_q, seqlen_q_rounded, kHeadDim), tiles in run layout
    void* dk;
    void* dv;
    int64_t dk_batch_stride, dk_row_stride, dk_head_stride;
    int64_t dv_batch_stride, dv_row_stride, dv_head_stride;
    int64_t dq_accum_split_stride;  // deterministic mode: CTA column x adds into slice x
    int seqlen_q;
    int seqlen_k;
    int seqlen_q_rounded;
    int n_blocks;  // key blocks; CTA column x owns blocks x, x + gridDim.x, ...
    int head_dim;
    int heads_q;
    int group_size;
    int kv_splits;  // CTAs (one cluster along y) sharing a kv head's query heads; 1 = none
    float softmax_scale;
    float scale_log2;
    bool deterministic;
    // Dropout (the kDropout kernels; params.h): the stream's key, offset and keep threshold.
    // Set by make_bwd_kernel_params for the kDropout kernels only; zero in the others.
    uint64_t dropout_seed = 0;
    uint32_t dropout_offset = 0;
    uint32_t dropout_keep_max = 0;
    float dropout_scale = 1.0f;  // 1 / (1 - p)
    // Variable-length batches (bwd_sequence.h; params.h): null dense. Then shape_q / shape_k are the
    // packed (total, d, heads, 1) tensors, seqlen_q / seqlen_k the max_seqlen bounds, batch the
    // sequences, and the default grid's x the key-block slots.
    int const* cu_seqlens_q = nullptr;
    int const* cu_seqlens_k = nullptr;
    int total_q = 0;
    int total_k = 0;
    int batch = 0;
    // Score options (the kScoreOptions kernels; params.h, common/score_mod.h): set by
    // make_bwd_kernel_params for those kernels only; the others never read them.
    int window_left = -1;   // -1: unbounded
    int window_right = -1;  // -1: unbounded (0 when causal: no window)
    float softcap = 0.0f;   // 0: off
    float softcap_scale = 0.0f;
    float score_unit_log2 = 0.0f;
    float alibi_unit_scale = 0.0f;
    float const* alibi_slopes = nullptr;  // null: off
    int64_t alibi_batch_stride = 0;
    // Traits::kTailLongestFirst: the causal default grid's last units taken by key block
    // (bwd_tile_order.h; launch_bwd_kernel sets it); 0 = the grid's own order.
    int tail_units = 0;
    // Default mode: CTA x's (sequence, key block), longest first (bwd_varlen_order.h).
    int2 const* varlen_work = nullptr;
  };
};

}  // namespace flashcore::cuda::sm90
