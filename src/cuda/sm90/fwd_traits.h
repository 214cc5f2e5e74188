// Compile-time description of one sm90 forward kernel: tiles, warp roles, wgmma TiledMmas,
// GMMA-swizzled shared-memory layouts, TMA copy types, shared storage and kernel parameters.
#pragma once

// N = 80/112/176 wgmma shapes (d256's 128 x 80 tile) need CuTe's extended shape list, defined
// before the first CuTe header of the TU (fwd_launch_template.h does it); the static_assert
// below catches a TU where it came too late.
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

template <typename Element_, int kHeadDim_, int kBlockM_, int kBlockN_, int kStages_, bool kIsCausal_,
          bool kPingPong_, int kQStages_ = 1, int kExp2FmaEvery_ = 0, int kClusterM_ = 1, bool kPrefetchNextQ_ = false,
          int kOStoreBytes_ = 4>
struct FwdTraits {
  using Element = Element_;
  using ElementAccum = float;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  static constexpr bool kIsCausal = kIsCausal_;
  static constexpr bool kPingPong = kPingPong_;
  // Q buffers: 2 lets a persistent CTA load the next tile's Q while the current one still reads
  // its own (the tile-boundary Q latency hidden), where shared memory has room for it.
  static constexpr int kQStages = kQStages_;
  static_assert(kQStages == 1 || kQStages == 2);
  // One Q buffer: the producer prefetches the next tile's Q into L2 (a TMA prefetch, no smem) a
  // few key blocks before this tile ends, so the Q load at the tile boundary, which may start
  // only once this tile's last QK^T is done, reads L2 instead of HBM (fwd_mainloop.h).
  static constexpr bool kPrefetchNextQ = kPrefetchNextQ_;
  static_assert(!kPrefetchNextQ || kQStages == 1, "with two Q buffers the next Q is already loaded during this tile");
  // Bytes a thread stores per instruction: 4, 8 or 16 (fwd_tile_size.h's o_store_bytes;
  // fwd_epilogue.h).
  static constexpr int kOStoreBytes = kOStoreBytes_;
  static_assert(kOStoreBytes == 4 || kOStoreBytes == 8 || kOStoreBytes == 16);
  // One softmax exponential in kExp2FmaEvery on the FMA pipe instead of MUFU (0: none); see
  // fwd_softmax.h and common/exp2_fma.h.
  static constexpr int kExp2FmaEvery = kExp2FmaEvery_;
  // d > 128: O is large (d/2 registers a thread); rescale it while QK^T runs on the tensor cores
  // instead of after the softmax, where nothing else overlaps it.
  static constexpr bool kRescaleOBeforeGemm = kHeadDim > 128;
  // CTAs per cluster along M: the kClusterM CTAs of a cluster work on neighbouring m_blocks of one
  // head, and each K/V tile is read from L2 once for all of them (each CTA loads 1/kClusterM of it
  // and the TMA multicasts it into every CTA's shared memory). Non-causal only: the CTAs of a
  // cluster must walk the same key blocks, tile after tile.
  static constexpr int kClusterM = kClusterM_;
  static_assert(kClusterM == 1 || kClusterM == 2);
  static_assert(kClusterM == 1 || !kIsCausal, "clustered tiles need the same key range in every CTA");

  // Warp roles: warpgroup 0 is the producer (one elected lane of warp 0 issues every TMA),
  // warpgroups 1.. are consumers, each owning a 64-row slab of the query tile.
  static constexpr int kConsumerWGs = kBlockM / 64;
  static_assert(kBlockM % 64 == 0 && kConsumerWGs >= 1 && kConsumerWGs <= 3);
  static_assert(!kPingPong || kConsumerWGs >= 2, "ping-pong alternates consumer warpgroups");
  static constexpr int kConsumerThreads = kConsumerWGs * 128;
  static constexpr int kThreads = kConsumerThreads + 128;
  // setmaxnreg: 128 * (producer + consumers * consumer) <= 64 K registers. A clustered producer
  // (multicast copies, the tail that waits out the last releases) spills 48 B in 24 registers
  // and none in 40, so its consumers get 232 (two warpgroups).
  static constexpr int kProducerRegs =
      kConsumerWGs == 1 ? 56 : (kConsumerWGs == 2 ? (kClusterM_ > 1 ? 40 : 24) : 32);
  static constexpr int kConsumerRegs =
      kConsumerWGs == 1 ? 256 : (kConsumerWGs == 2 ? (kClusterM_ > 1 ? 232 : 240) : 160);

  using TileShapeQK = cute::Shape<cute::Int<kBlockM>, cute::Int<kBlockN>, cute::Int<kHeadDim>>;  // (M, N, d)
  using TileShapePV = cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>, cute::Int<kBlockN>>;  // (M, d, N)
  using AtomLayoutMma = cute::Layout<cute::Shape<cute::Int<kConsumerWGs>, cute::_1, cute::_1>>;

  // S = Q K^T with both operands in smem (K-major); O += P V with P from registers and V read
  // MN-major from its row-major tile (no transpose for 16-bit types).
  using TiledMmaQK = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, ElementAccum, TileShapeQK>(), AtomLayoutMma{}));
  using TiledMmaPV = decltype(cute::make_tiled_mma(
      cute::GMMA::rs_op_selector<Element, Element, ElementAccum, TileShapePV, cute::GMMA::Major::K,
                                 cute::GMMA::Major::MN>(),
      AtomLayoutMma{}));
  // One wgmma spans the whole key block: without the extended shape list CuTe would split
  // N = 80 into five N = 16 instructions, each re-reading Q from smem.
  static_assert(cute::size<1>(typename TiledMmaQK::Shape_MNK{}) == kBlockN,
                "QK^T wgmma narrower than kBlockN: define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED first");
  static_assert(cute::size<1>(typename TiledMmaPV::Shape_MNK{}) == kHeadDim, "P V wgmma narrower than d");

  using SmemLayoutAtomQ = decltype(cutlass::gemm::collective::detail::ss_smem_selector<
                                   cute::GMMA::Major::K, Element, cute::Int<kBlockM>, cute::Int<kHeadDim>>());
  using SmemLayoutQ = decltype(cute::tile_to_shape(SmemLayoutAtomQ{},
                                                   cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>>{}));  // (M, d)
  using SmemLayoutAtomK = decltype(cutlass::gemm::collective::detail::ss_smem_selector<
                                   cute::GMMA::Major::K, Element, cute::Int<kBlockN>, cute::Int<kHeadDim>>());
  using SmemLayoutK = decltype(cute::tile_to_shape(
      SmemLayoutAtomK{}, cute::Shape<cute::Int<kBlockN>, cute::Int<kHeadDim>, cute::Int<kStages>>{}));  // (N, d, stage)
  using SmemLayoutAtomVt = decltype(cutlass::gemm::collective::detail::ss_smem_selector<
                                    cute::GMMA::Major::MN, Element, cute::Int<kHeadDim>, cute::Int<kBlockN>>());
  // Atoms tiled along N first so each d-slab of a stage is contiguous, as the TMA box writes it.
  using SmemLayoutVt = decltype(cute::tile_to_shape(
      SmemLayoutAtomVt{}, cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockN>, cute::Int<kStages>>{},
      cute::Step<cute::_2, cute::_1, cute::_3>{}));  // (d, N, stage)

  // Global tensors as TMA sees them: (seqlen, d, head, batch), d contiguous; V as (d, seqlen, ...).
  // Varlen: (total rows, d, head, 1), the packed tensors whole (fwd_sequence.h).
  using ShapeQKV = cute::Shape<int32_t, int32_t, int32_t, int32_t>;
  using StrideQKV = cute::Stride<int64_t, cute::_1, int64_t, int64_t>;
  using StrideVt = cute::Stride<cute::_1, int64_t, int64_t, int64_t>;

  using TmaQ = decltype(cute::make_tma_copy(
      cute::SM90_TMA_LOAD{},
      cute::make_tensor(cute::make_gmem_ptr(static_cast<Element const*>(nullptr)), ShapeQKV{}, StrideQKV{}),
      SmemLayoutQ{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>>{}, cute::_1{}));
  // K and V: multicast over the cluster when kClusterM > 1 (the box is split kClusterM ways).
  using TmaLoadKV = std::conditional_t<kClusterM == 1, cute::SM90_TMA_LOAD, cute::SM90_TMA_LOAD_MULTICAST>;
  using TmaK = decltype(cute::make_tma_copy(
      TmaLoadKV{},
      cute::make_tensor(cute::make_gmem_ptr(static_cast<Element const*>(nullptr)), ShapeQKV{}, StrideQKV{}),
      cute::take<0, 2>(SmemLayoutK{}), cute::Shape<cute::Int<kBlockN>, cute::Int<kHeadDim>>{},
      cute::Int<kClusterM>{}));
  using TmaV = decltype(cute::make_tma_copy(
      TmaLoadKV{},
      cute::make_tensor(cute::make_gmem_ptr(static_cast<Element const*>(nullptr)), ShapeQKV{}, StrideVt{}),
      cute::take<0, 2>(SmemLayoutVt{}), cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockN>>{},
      cute::Int<kClusterM>{}));
  // Bytes each CTA receives per tile (out-of-bounds elements are zero-filled and counted); with a
  // cluster, a K/V tile's bytes arrive from every CTA's share of the multicast.
  static constexpr uint32_t kBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesKV = kBlockN * kHeadDim * sizeof(Element);

  struct SharedStorage {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ> * kQStages, 1024> q;  // kQStages x (M, d)
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>, 1024> k;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutVt>, 1024> v;
    alignas(16) uint64_t barrier_q[kQStages];  // Q buffer i has landed
    uint64_t barrier_q_empty[kQStages];        // every consumer warp is done reading Q buffer i (one arrival each)
    TmaPipelineStorage<kStages> pipeline_k;
    TmaPipelineStorage<kStages> pipeline_v;
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));
  static_assert(kSmemBytes <= 227 * 1024, "tile does not fit in shared memory");

  struct Params {
    TmaQ tma_q;
    TmaK tma_k;
    TmaV tma_v;
    ShapeQKV shape_q;   // (seqlen_q, head_dim, heads_q, batch)
    ShapeQKV shape_k;   // (seqlen_k, head_dim, heads_kv, batch)
    ShapeQKV shape_vt;  // (head_dim, seqlen_k, heads_kv, batch)
    void* out;
    int64_t o_batch_stride;
    int64_t o_row_stride;
    int64_t o_head_stride;
    float* lse;
    int64_t lse_batch_stride;
    int64_t lse_head_stride;
    int seqlen_q;
    int seqlen_k;
    int head_dim;
    int heads_q;
    int batch;
    int group_size;
    int num_m_blocks;
    // Causal: the m_blocks are aligned to the bottom of the query range (rows shifted down by
    // row_offset = num_m_blocks * kBlockM - seqlen_q), so the ragged tile is the shortest, top
    // one instead of the longest; 0 when not causal.
    int row_offset;
    // Applied to every row_offset (dense above, varlen per sequence in fwd_sequence.h): ~15 with
    // dropout, whose stream counts rows in 16-row groups from a sequence's first query and needs
    // each warp's slab to start on one (common/dropout.h), else ~0.
    int row_offset_mask;
    float softmax_scale;
    float scale_log2;
    // Varlen (null: dense): sequence b is rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of the
    // total_q query rows (seqlen_q above is then the longest), its keys likewise; each tile reads
    // its sequence's lengths, first rows and row_offset (fwd_sequence.h).
    int const* cu_seqlens_q;
    int const* cu_seqlens_k;
    int total_q;
    int total_k;
  };

};

}  // namespace flashcore::cuda::sm90
