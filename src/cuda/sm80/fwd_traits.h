// Compile-time description of one sm80 forward kernel: tile sizes, the tiled MMA and the shared
// memory layouts; the operand copies come from OperandTraits.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/sm80/operand_traits.h"

namespace flashcore::cuda::sm80 {

template <typename Element_, int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, int kStagesKV_ = 1>
struct FwdTraits : OperandTraits<Element_, kHeadDim_, kNWarps_ * 32> {
  using Base = OperandTraits<Element_, kHeadDim_, kNWarps_ * 32>;
  using typename Base::Element;
  using typename Base::MmaOp;
  using typename Base::SmemLayoutAtom;
  using Base::kHeadDim;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kNWarps = kNWarps_;
  static constexpr int kNThreads = Base::kNThreads;
  // K and V buffers each: 2 lets the next key block's K and V load during a whole iteration
  // (see fwd_kernel.h); 1 overlaps each load with half an iteration only.
  static constexpr int kStagesKV = kStagesKV_;
  static_assert(kStagesKV == 1 || kStagesKV == 2);
  static_assert(kBlockM % (16 * kNWarps) == 0, "each warp owns whole 16-row MMA tiles");

  // Warps are stacked along M so that each query row's scores live in one warp (the softmax
  // reductions stay within a quad of lanes).
  using TiledMma = cute::TiledMMA<cute::MMA_Atom<MmaOp>, cute::Layout<cute::Shape<cute::Int<kNWarps>, cute::_1, cute::_1>>,
                                  cute::Tile<cute::Int<16 * kNWarps>, cute::_16, cute::_16>>;

  using SmemLayoutQ = decltype(cute::tile_to_shape(SmemLayoutAtom{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>>{}));
  using SmemLayoutKV = decltype(cute::tile_to_shape(SmemLayoutAtom{}, cute::Shape<cute::Int<kBlockN>, cute::Int<kHeadDim>>{}));
  // V viewed as (head_dim, kBlockN) over the same bytes: the B operand of O += P V.
  using SmemLayoutVt = decltype(cute::composition(
      SmemLayoutKV{}, cute::make_layout(cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockN>>{}, cute::GenRowMajor{})));
  using SmemLayoutVtNoSwizzle = decltype(cute::get_nonswizzle_portion(SmemLayoutVt{}));

  static constexpr int kSmemQBytes = cute::cosize_v<SmemLayoutQ> * sizeof(Element);
  static constexpr int kSmemKVBytes = cute::cosize_v<SmemLayoutKV> * sizeof(Element);
  static constexpr int kSmemBytes = kSmemQBytes + 2 * kStagesKV * kSmemKVBytes;  // Q, K[], V[]; O reuses Q's tile
};

}  // namespace flashcore::cuda::sm80
