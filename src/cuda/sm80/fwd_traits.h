// Compile-time description of one sm80 forward kernel: tile sizes, the tensor-core MMA, shared
// memory layouts and the copies between global, shared and register memory.
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

namespace flashcore::cuda::sm80 {

template <typename Element_, int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_>
struct FwdTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kNWarps = kNWarps_;
  static constexpr int kNThreads = kNWarps * 32;
  static_assert(kHeadDim % 32 == 0, "head dims are instantiated in multiples of 32");
  static_assert(kBlockM % (16 * kNWarps) == 0, "each warp owns whole 16-row MMA tiles");

  // mma.sync m16n8k16, fp16/bf16 in, fp32 accumulate. Warps are stacked along M so that each
  // query row's scores live in one warp (the softmax reductions stay within a quad of lanes).
  using MmaOp = std::conditional_t<std::is_same_v<Element, cutlass::half_t>, cute::SM80_16x8x16_F32F16F16F32_TN,
                                   cute::SM80_16x8x16_F32BF16BF16F32_TN>;
  using TiledMma = cute::TiledMMA<cute::MMA_Atom<MmaOp>, cute::Layout<cute::Shape<cute::Int<kNWarps>, cute::_1, cute::_1>>,
                                  cute::Tile<cute::Int<16 * kNWarps>, cute::_16, cute::_16>>;

  // Shared memory: rows of 64 (or 32) elements = 128 (64) bytes, XOR-swizzled so that both the
  // 16-byte cp.async stores (a row each) and the ldmatrix loads (8 rows of one 16-byte column)
  // hit 8 distinct 16-byte bank groups.
  static constexpr int kSmemRowElems = kHeadDim % 64 == 0 ? 64 : 32;
  static constexpr int kSwizzleBits = kSmemRowElems == 64 ? 3 : 2;
  using SmemLayoutAtom = decltype(cute::composition(
      cute::Swizzle<kSwizzleBits, 3, 3>{},
      cute::Layout<cute::Shape<cute::_8, cute::Int<kSmemRowElems>>, cute::Stride<cute::Int<kSmemRowElems>, cute::_1>>{}));
  using SmemLayoutQ = decltype(cute::tile_to_shape(SmemLayoutAtom{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>>{}));
  using SmemLayoutKV = decltype(cute::tile_to_shape(SmemLayoutAtom{}, cute::Shape<cute::Int<kBlockN>, cute::Int<kHeadDim>>{}));
  // V viewed as (head_dim, kBlockN) over the same bytes: the B operand of O += P V.
  using SmemLayoutVt = decltype(cute::composition(
      SmemLayoutKV{}, cute::make_layout(cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockN>>{}, cute::GenRowMajor{})));
  using SmemLayoutVtNoSwizzle = decltype(cute::get_nonswizzle_portion(SmemLayoutVt{}));

  // ldmatrix: x4 for Q and K, transposing x4 for V (its rows are keys, the MMA wants head_dim rows).
  using SmemCopyAtom = cute::Copy_Atom<cute::SM75_U32x4_LDSM_N, Element>;
  using SmemCopyAtomTransposed = cute::Copy_Atom<cute::SM75_U16x8_LDSM_T, Element>;
  using SmemCopyAtomO = cute::Copy_Atom<cute::AutoVectorizingCopyWithAssumedAlignment<32>, Element>;

  // Global -> shared with 16-byte cp.async (8 elements a thread), a row of kSmemRowElems per
  // kGmemThreadsPerRow threads so a warp reads whole 128-byte lines.
  static constexpr int kGmemElemsPerLoad = 16 / sizeof(Element);
  static constexpr int kGmemThreadsPerRow = kSmemRowElems / kGmemElemsPerLoad;
  using GmemLayoutAtom = cute::Layout<cute::Shape<cute::Int<kNThreads / kGmemThreadsPerRow>, cute::Int<kGmemThreadsPerRow>>,
                                      cute::Stride<cute::Int<kGmemThreadsPerRow>, cute::_1>>;
  using GmemValLayout = cute::Layout<cute::Shape<cute::_1, cute::Int<kGmemElemsPerLoad>>>;
  using GmemTiledCopyQKV = decltype(cute::make_tiled_copy(
      cute::Copy_Atom<cute::SM80_CP_ASYNC_CACHEGLOBAL<cute::uint128_t>, Element>{}, GmemLayoutAtom{}, GmemValLayout{}));
  using GmemTiledCopyO = decltype(cute::make_tiled_copy(cute::Copy_Atom<cute::UniversalCopy<cute::uint128_t>, Element>{},
                                                        GmemLayoutAtom{}, GmemValLayout{}));

  static constexpr int kSmemQBytes = cute::cosize_v<SmemLayoutQ> * sizeof(Element);
  static constexpr int kSmemKVBytes = cute::cosize_v<SmemLayoutKV> * sizeof(Element);
  static constexpr int kSmemBytes = kSmemQBytes + 2 * kSmemKVBytes;  // Q, K, V; O reuses Q's tile
};

}  // namespace flashcore::cuda::sm80
