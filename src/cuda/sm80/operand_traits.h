// What every sm80-path kernel (forward and backward) shares about moving fp16/bf16 operands:
// the m16n8k16 MMA, the swizzled shared-memory atom for (rows, head_dim) tiles, the ldmatrix
// atoms, and the 16-byte global<->shared copies. Kernel traits derive from this and add their
// tile shapes.
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

namespace flashcore::cuda::sm80 {

template <typename Element_, int kHeadDim_, int kNThreads_>
struct OperandTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kNThreads = kNThreads_;
  static_assert(kHeadDim % 32 == 0, "head dims are instantiated in multiples of 32");

  // mma.sync m16n8k16, fp16/bf16 in, fp32 accumulate.
  using MmaOp = std::conditional_t<std::is_same_v<Element, cutlass::half_t>, cute::SM80_16x8x16_F32F16F16F32_TN,
                                   cute::SM80_16x8x16_F32BF16BF16F32_TN>;

  // (rows, head_dim) tiles in shared memory: rows of 64 (or 32) elements = 128 (64) bytes,
  // XOR-swizzled so that both the 16-byte cp.async stores (a row each) and the ldmatrix loads,
  // plain and transposing (8 rows of one 16-byte column), hit 8 distinct 16-byte bank groups.
  static constexpr int kSmemRowElems = kHeadDim % 64 == 0 ? 64 : 32;
  static constexpr int kSwizzleBits = kSmemRowElems == 64 ? 3 : 2;
  using SmemLayoutAtom = decltype(cute::composition(
      cute::Swizzle<kSwizzleBits, 3, 3>{},
      cute::Layout<cute::Shape<cute::_8, cute::Int<kSmemRowElems>>, cute::Stride<cute::Int<kSmemRowElems>, cute::_1>>{}));

  // ldmatrix x4 for operands stored (rows, k); the transposing x4 for transposed views (e.g. V,
  // whose rows are keys where the MMA wants head_dim rows).
  using SmemCopyAtom = cute::Copy_Atom<cute::SM75_U32x4_LDSM_N, Element>;
  using SmemCopyAtomTransposed = cute::Copy_Atom<cute::SM75_U16x8_LDSM_T, Element>;
  // Accumulator fragments (pairs of neighbouring columns) to shared memory.
  using SmemCopyAtomStore = cute::Copy_Atom<cute::AutoVectorizingCopyWithAssumedAlignment<32>, Element>;

  // Global <-> shared with 16-byte accesses (8 elements a thread), kGmemThreadsPerRow threads a
  // shared-memory row so a warp touches whole 128-byte lines.
  static constexpr int kGmemElemsPerLoad = 16 / sizeof(Element);
  static constexpr int kGmemThreadsPerRow = kSmemRowElems / kGmemElemsPerLoad;
  using GmemLayoutAtom = cute::Layout<cute::Shape<cute::Int<kNThreads / kGmemThreadsPerRow>, cute::Int<kGmemThreadsPerRow>>,
                                      cute::Stride<cute::Int<kGmemThreadsPerRow>, cute::_1>>;
  using GmemValLayout = cute::Layout<cute::Shape<cute::_1, cute::Int<kGmemElemsPerLoad>>>;
  using GmemTiledCopyLoad = decltype(cute::make_tiled_copy(
      cute::Copy_Atom<cute::SM80_CP_ASYNC_CACHEGLOBAL<cute::uint128_t>, Element>{}, GmemLayoutAtom{}, GmemValLayout{}));
  using GmemTiledCopyStore = decltype(cute::make_tiled_copy(
      cute::Copy_Atom<cute::UniversalCopy<cute::uint128_t>, Element>{}, GmemLayoutAtom{}, GmemValLayout{}));
};

}  // namespace flashcore::cuda::sm80
