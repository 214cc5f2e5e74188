// Compile-time description of one sm80 backward kernel: tile sizes, the three tensor-core MMAs,
// the shared-memory layouts (with the transposed views the second products read) and the copies
// between global, shared and register memory. See bwd_tile_size.h for the numbers.
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

namespace flashcore::cuda::sm80 {

template <typename Element_, int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, int kAtomMSdP_,
          int kAtomNdKV_, int kAtomMdQ_, int kStages_>
struct BwdTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kNWarps = kNWarps_;
  static constexpr int kNThreads = kNWarps * 32;
  static constexpr int kAtomMSdP = kAtomMSdP_;
  static constexpr int kAtomNdKV = kAtomNdKV_;
  static constexpr int kAtomMdQ = kAtomMdQ_;
  static constexpr int kStages = kStages_;
  static_assert(kHeadDim % 32 == 0, "head dims are instantiated in multiples of 32");
  static_assert(kBlockN % 64 == 0, "P and dS are stored in 64-column swizzled atoms");
  static_assert(kStages == 1 || kStages == 2);
  static_assert(kNWarps % kAtomMSdP == 0 && kNWarps % kAtomNdKV == 0 && kNWarps % kAtomMdQ == 0);

  // mma.sync m16n8k16, fp16/bf16 in, fp32 accumulate. A warp tile is 16 rows x 16 columns (two
  // n8 atoms) so that one ldmatrix.x4 feeds a whole k16 step of either operand.
  using MmaOp = std::conditional_t<std::is_same_v<Element, cutlass::half_t>, cute::SM80_16x8x16_F32F16F16F32_TN,
                                   cute::SM80_16x8x16_F32BF16BF16F32_TN>;
  template <int kWarpsAlongRows>
  using WarpTiledMma =
      cute::TiledMMA<cute::MMA_Atom<MmaOp>,
                     cute::Layout<cute::Shape<cute::Int<kWarpsAlongRows>, cute::Int<kNWarps / kWarpsAlongRows>, cute::_1>>,
                     cute::Tile<cute::Int<16 * kWarpsAlongRows>, cute::Int<16 * kNWarps / kWarpsAlongRows>, cute::_16>>;
  using TiledMmaSdP = WarpTiledMma<kAtomMSdP>;  // S, dP: (kBlockM, kBlockN), k = head_dim
  using TiledMmadKV = WarpTiledMma<kAtomNdKV>;  // dK, dV: (kBlockN, kHeadDim), k = kBlockM
  using TiledMmadQ = WarpTiledMma<kAtomMdQ>;    // dQ: (kBlockM, kHeadDim), k = kBlockN

  // Q, dO, K, V in shared memory: rows of 64 (or 32) elements = 128 (64) bytes, XOR-swizzled so
  // that 16-byte cp.async stores and ldmatrix loads (plain and transposing) hit distinct banks.
  static constexpr int kSmemRowElems = kHeadDim % 64 == 0 ? 64 : 32;
  static constexpr int kSwizzleBits = kSmemRowElems == 64 ? 3 : 2;
  using SmemLayoutAtom = decltype(cute::composition(
      cute::Swizzle<kSwizzleBits, 3, 3>{},
      cute::Layout<cute::Shape<cute::_8, cute::Int<kSmemRowElems>>, cute::Stride<cute::Int<kSmemRowElems>, cute::_1>>{}));
  using SmemLayoutQdO = decltype(cute::tile_to_shape(SmemLayoutAtom{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>>{}));
  using SmemLayoutKV = decltype(cute::tile_to_shape(SmemLayoutAtom{}, cute::Shape<cute::Int<kBlockN>, cute::Int<kHeadDim>>{}));
  // P and dS: (kBlockM, kBlockN) in 8 x 64 atoms.
  using SmemLayoutAtomPdS = decltype(cute::composition(
      cute::Swizzle<3, 3, 3>{}, cute::Layout<cute::Shape<cute::_8, cute::_64>, cute::Stride<cute::_64, cute::_1>>{}));
  using SmemLayoutPdS = decltype(cute::tile_to_shape(SmemLayoutAtomPdS{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kBlockN>>{}));

  // Transposed views over the same bytes, the operands of the second products:
  //   Qᵀ, dOᵀ (kHeadDim, kBlockM): B of dK = dSᵀ Q and dV = Pᵀ dO
  //   Kᵀ (kHeadDim, kBlockN):      B of dQ = dS K
  //   Pᵀ, dSᵀ (kBlockN, kBlockM):  A of dV and dK
  // The NoSwizzle versions only give register fragments their shapes.
  template <class Layout, int kRows, int kCols>
  using Transposed = decltype(cute::composition(
      Layout{}, cute::make_layout(cute::Shape<cute::Int<kRows>, cute::Int<kCols>>{}, cute::GenRowMajor{})));
  using SmemLayoutQdOt = Transposed<SmemLayoutQdO, kHeadDim, kBlockM>;
  using SmemLayoutKt = Transposed<SmemLayoutKV, kHeadDim, kBlockN>;
  using SmemLayoutPdSt = Transposed<SmemLayoutPdS, kBlockN, kBlockM>;
  using SmemLayoutQdOtNoSwizzle = decltype(cute::get_nonswizzle_portion(SmemLayoutQdOt{}));
  using SmemLayoutKtNoSwizzle = decltype(cute::get_nonswizzle_portion(SmemLayoutKt{}));
  using SmemLayoutPdStNoSwizzle = decltype(cute::get_nonswizzle_portion(SmemLayoutPdSt{}));

  // ldmatrix for operands stored as (rows, k); the transposing ldmatrix for the transposed views.
  using SmemCopyAtom = cute::Copy_Atom<cute::SM75_U32x4_LDSM_N, Element>;
  using SmemCopyAtomTransposed = cute::Copy_Atom<cute::SM75_U16x8_LDSM_T, Element>;
  // Accumulator fragments (pairs of neighbouring columns) to shared memory: P, dS, dK, dV.
  using SmemCopyAtomStore = cute::Copy_Atom<cute::AutoVectorizingCopyWithAssumedAlignment<32>, Element>;

  // Global <-> shared with 16-byte accesses (8 elements a thread), kGmemThreadsPerRow threads a
  // smem row so a warp touches whole 128-byte lines.
  static constexpr int kGmemElemsPerLoad = 16 / sizeof(Element);
  static constexpr int kGmemThreadsPerRow = kSmemRowElems / kGmemElemsPerLoad;
  using GmemLayoutAtom = cute::Layout<cute::Shape<cute::Int<kNThreads / kGmemThreadsPerRow>, cute::Int<kGmemThreadsPerRow>>,
                                      cute::Stride<cute::Int<kGmemThreadsPerRow>, cute::_1>>;
  using GmemValLayout = cute::Layout<cute::Shape<cute::_1, cute::Int<kGmemElemsPerLoad>>>;
  using GmemTiledCopyLoad = decltype(cute::make_tiled_copy(
      cute::Copy_Atom<cute::SM80_CP_ASYNC_CACHEGLOBAL<cute::uint128_t>, Element>{}, GmemLayoutAtom{}, GmemValLayout{}));
  using GmemTiledCopyStore = decltype(cute::make_tiled_copy(
      cute::Copy_Atom<cute::UniversalCopy<cute::uint128_t>, Element>{}, GmemLayoutAtom{}, GmemValLayout{}));
  static_assert(kBlockM % (kNThreads / kGmemThreadsPerRow) == 0, "the load tiling must divide the query block");

  static constexpr int kSmemQdOElems = cute::cosize_v<SmemLayoutQdO>;
  static constexpr int kSmemKVElems = cute::cosize_v<SmemLayoutKV>;
  static constexpr int kSmemPdSElems = cute::cosize_v<SmemLayoutPdS>;
  // Q and dO (kStages buffers each), K, V, P, dS, then per query row lse_log2 and D (fp32,
  // kStages buffers each). dK and dV are staged through K's and V's tiles.
  static constexpr int kSmemBytes =
      (2 * kStages * kSmemQdOElems + 2 * kSmemKVElems + 2 * kSmemPdSElems) * int(sizeof(Element)) +
      2 * kStages * kBlockM * int(sizeof(float));
};

}  // namespace flashcore::cuda::sm80
