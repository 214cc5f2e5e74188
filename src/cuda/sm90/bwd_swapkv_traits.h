// Compile-time description of the sm90 backward for large head dims (d256): dK and dV computed
// transposed (FA3's dKV_swapAB and dQ_swapAB), so the two consumer warpgroups split the head dim
// instead of the keys. At d256 the d128 arrangement (bwd_traits.h: each warpgroup holds dK and dV
// of its 64 keys over all of d) would need 256 accumulator registers a thread for dK and dV alone.
//
// The products, per query block (M = kBlockM queries) of the CTA's key block (N = kBlockN keys):
//   S   = Q Kᵀ      (M x N, K = d)   SS, Q and K K-major.            Warpgroup w: keys [wN/2, (w+1)N/2).
//   dP  = dO Vᵀ     (M x N, K = d)   SS, dO and V K-major.           Same split.
//   P, dS -> smem (M x N, keys contiguous), both warpgroups' halves, one named barrier.
//   dVᵀ += dOᵀ P    (d x N, K = M)   SS: dO read MN-major (transposed view), P as (keys, queries)
//                                    MN-major.                       Warpgroup w: d rows of its atoms.
//   dKᵀ += Qᵀ dS    (d x N, K = M)   SS, the same with Q and dS.
//   dQᵀ  = Kᵀ dSᵀ   (d x M, K = N)   SS: K read MN-major, dS K-major. Same d split.
// A thread holds dVᵀ and dKᵀ (d N / 256 floats each) for the whole sweep, dQᵀ (d M / 256) for one
// step, and S and dP (M N / 256) until P and dS are in smem: at d256 with 64 x 64, 64 + 64 + 64 (+
// 16 + 16 before dQ exists) of 240 registers.
//
// The field names the producer and the shared preprocess read (SmemLayoutQ, SmemLayoutK, TmaQdO,
// TmaKV, kBytes*, SharedStorage's q/d_o/k/v/lse_log2/dsum/barriers/pipelines, Params) are those of
// BwdTraits, so BwdMainloop<...>::load and block_of serve this kernel unchanged.
#pragma once

#ifndef CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#endif

#include <cstdint>

#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/tensor.hpp>
#include <cutlass/gemm/collective/builders/sm90_common.inl>

#include "cuda/sm90/pipeline.h"

namespace flashcore::cuda::sm90 {

template <typename Element_, int kHeadDim_, int kBlockM_, int kBlockN_, int kStages_, bool kIsCausal_>
struct BwdTraitsSwapKV {
  using Element = Element_;
  using ElementAccum = float;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  static constexpr bool kIsCausal = kIsCausal_;
  // No dropout kernels at d > 128 (run_bwd_pass refuses a dropout call before launching).
  static constexpr bool kDropout = false;
  static constexpr bool kScoreOptions = false;  // window/softcap/ALiBi: the d <= 128 option kernels only

  // Warp roles as in BwdTraits: warpgroup 0 produces, warpgroups 1 and 2 consume.
  static constexpr int kConsumerWGs = 2;
  static constexpr int kConsumerThreads = kConsumerWGs * 128;
  static constexpr int kConsumerWarps = kConsumerThreads / 32;
  static constexpr int kThreads = kConsumerThreads + 128;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static_assert(kBlockM == 64, "one wgmma atom of queries in S and dP");
  static_assert(kHeadDim % (64 * kConsumerWGs) == 0, "the d split gives each warpgroup whole 64-row atoms");
  static_assert(kBlockN % (8 * kConsumerWGs) == 0, "the key split needs whole n8 groups a warpgroup");

  using AtomLayoutKeys = cute::Layout<cute::Shape<cute::_1, cute::Int<kConsumerWGs>, cute::_1>>;  // WGs along keys
  using AtomLayoutD = cute::Layout<cute::Shape<cute::Int<kConsumerWGs>, cute::_1, cute::_1>>;     // WGs along d

  using TiledMmaSdP = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, ElementAccum,
                                 cute::Shape<cute::_64, cute::Int<kBlockN / kConsumerWGs>, cute::Int<kHeadDim>>>(),
      AtomLayoutKeys{}));
  using TiledMmadKV = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, ElementAccum,
                                 cute::Shape<cute::_64, cute::Int<kBlockN>, cute::Int<kBlockM>>, cute::GMMA::Major::MN,
                                 cute::GMMA::Major::MN>(),
      AtomLayoutD{}));
  using TiledMmadQ = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, ElementAccum,
                                 cute::Shape<cute::_64, cute::Int<kBlockM>, cute::Int<kBlockN>>, cute::GMMA::Major::MN,
                                 cute::GMMA::Major::K>(),
      AtomLayoutD{}));

  using ShapeSdP = cute::Shape<cute::Int<kBlockM>, cute::Int<kBlockN>>;   // (M, N): S, dP
  using ShapedKV = cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockN>>;  // (d, N): dKᵀ, dVᵀ
  using ShapedQ = cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockM>>;   // (d, M): dQᵀ
  // dQᵀ values per consumer thread (the dq_accum run layout of common/dq_accumulate.h).
  static constexpr int kDqFragElems = kBlockM * kHeadDim / kConsumerThreads;
  // TiledMmadQ's accumulator is (d, query): bwd_convert_dq.h reads the fragment's coordinates so.
  static constexpr bool kDqTransposed = true;

  // K-major tiles as TMA writes them (d contiguous); d % 64 == 0, so 128-byte swizzling.
  using SmemLayoutAtomQ = decltype(cutlass::gemm::collective::detail::ss_smem_selector<
                                   cute::GMMA::Major::K, Element, cute::Int<kBlockM>, cute::Int<kHeadDim>>());
  using SmemLayoutQ = decltype(cute::tile_to_shape(
      SmemLayoutAtomQ{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>, cute::Int<kStages>>{}));  // (M, d, stage)
  using SmemLayoutAtomK = decltype(cutlass::gemm::collective::detail::ss_smem_selector<
                                   cute::GMMA::Major::K, Element, cute::Int<kBlockN>, cute::Int<kHeadDim>>());
  using SmemLayoutK = decltype(cute::tile_to_shape(SmemLayoutAtomK{},
                                                   cute::Shape<cute::Int<kBlockN>, cute::Int<kHeadDim>>{}));  // (N, d)
  // The same bytes seen transposed (d contiguous = the MN-major A operands of dVᵀ, dKᵀ, dQᵀ).
  using SmemLayoutQt = decltype(cute::composition(
      SmemLayoutQ{}, cute::make_layout(cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockM>, cute::Int<kStages>>{},
                                       cute::Stride<cute::Int<kBlockM>, cute::_1, cute::Int<kBlockM * kHeadDim>>{})));  // (d, M, stage)
  using SmemLayoutKt = decltype(cute::composition(
      SmemLayoutK{}, cute::make_layout(cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockN>>{},
                                       cute::Stride<cute::Int<kBlockN>, cute::_1>{})));  // (d, N)
  // P and dS as the consumers store them, keys contiguous: the K-major B operand of dQᵀ (dS as
  // (queries, keys)); transposed, the MN-major B operand of dVᵀ and dKᵀ ((keys, queries)).
  using SmemLayoutAtomPdS = decltype(cutlass::gemm::collective::detail::ss_smem_selector<
                                     cute::GMMA::Major::K, Element, cute::Int<kBlockM>, cute::Int<kBlockN>>());
  using SmemLayoutPdS = decltype(cute::tile_to_shape(
      SmemLayoutAtomPdS{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kBlockN>, cute::_2>{}));  // (M, N, buf)
  using SmemLayoutPdSt = decltype(cute::composition(
      SmemLayoutPdS{}, cute::make_layout(cute::Shape<cute::Int<kBlockN>, cute::Int<kBlockM>, cute::_2>{},
                                         cute::Stride<cute::Int<kBlockM>, cute::_1, cute::Int<kBlockM * kBlockN>>{})));  // (N, M, buf)

  // Global tensors, TMA and bytes: as in BwdTraits.
  using ShapeQKV = cute::Shape<int32_t, int32_t, int32_t, int32_t>;
  using StrideQKV = cute::Stride<int64_t, cute::_1, int64_t, int64_t>;
  using GmemTensor = decltype(cute::make_tensor(cute::make_gmem_ptr(static_cast<Element const*>(nullptr)),
                                                ShapeQKV{}, StrideQKV{}));
  using TmaQdO = decltype(cute::make_tma_copy(cute::SM90_TMA_LOAD{}, GmemTensor{},
                                              cute::take<0, 2>(SmemLayoutQ{}),
                                              cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>>{}, cute::_1{}));
  using TmaKV = decltype(cute::make_tma_copy(cute::SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutK{},
                                             cute::Shape<cute::Int<kBlockN>, cute::Int<kHeadDim>>{}, cute::_1{}));
  static constexpr uint32_t kBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesKV = kBlockN * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesRowStat = kBlockM * sizeof(float);

  struct SharedStorage {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>, 1024> k;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>, 1024> v;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>, 1024> q;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>, 1024> d_o;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutPdS>, 1024> p;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutPdS>, 1024> ds;
    cute::array_aligned<float, kBlockM * kStages, 128> lse_log2;  // (M, stage)
    cute::array_aligned<float, kBlockM * kStages, 128> dsum;      // (M, stage)
    alignas(16) uint64_t barrier_kv;
    uint64_t barrier_kv_empty;
    TmaPipelineStorage<kStages> pipeline_q;
    TmaPipelineStorage<kStages> pipeline_do;
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));
  static_assert(kSmemBytes <= 227 * 1024, "tile does not fit in shared memory");

  // BwdTraits::Params's fields with this tile's TMA types (make_bwd_kernel_params fills either).
  struct Params {
    TmaQdO tma_q;
    TmaQdO tma_do;
    TmaKV tma_k;
    TmaKV tma_v;
    ShapeQKV shape_q;
    ShapeQKV shape_k;
    float const* lse_log2;
    float const* dsum;
    float* dq_accum;  // (batch, heads_q, seqlen_q_rounded, kHeadDim), tiles in run layout of dQᵀ fragments
    void* dk;
    void* dv;
    int64_t dk_batch_stride, dk_row_stride, dk_head_stride;
    int64_t dv_batch_stride, dv_row_stride, dv_head_stride;
    int64_t dq_accum_split_stride;
    int seqlen_q;
    int seqlen_k;
    int seqlen_q_rounded;
    int n_blocks;
    int head_dim;
    int heads_q;
    int group_size;
    int kv_splits;  // CTAs a kv head's query-head group is split over (bwd_swapkv_kv_splits), else 1
    float softmax_scale;
    float scale_log2;
    bool deterministic;
    // Deterministic mode by rounds: launch r runs key blocks blockIdx.x + r gridDim.x.
    int key_block_round = 0;
    // Default mode, causal: (batch, kv head) units per L2 section of the longest-first order
    // (bwd_tile_order.h); 0 keeps the grid's own order.
    int l2_section = 0;
  };
};

}  // namespace flashcore::cuda::sm90
