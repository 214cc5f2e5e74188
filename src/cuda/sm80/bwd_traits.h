// Compile-time description of one sm80 backward kernel: tile sizes, the three tensor-core MMAs,
// the shared-memory layouts (with the transposed views the second products read); the operand
// copies come from OperandTraits. See bwd_tile_size.h for the numbers.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/sm80/operand_traits.h"

namespace flashcore::cuda::sm80 {

template <typename Element_, int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, int kAtomMSdP_,
          int kAtomNdKV_, int kAtomMdQ_, int kStages_>
struct BwdTraits : OperandTraits<Element_, kHeadDim_, kNWarps_ * 32> {
  using Base = OperandTraits<Element_, kHeadDim_, kNWarps_ * 32>;
  using typename Base::Element;
  using typename Base::MmaOp;
  using typename Base::SmemLayoutAtom;
  using Base::kHeadDim;
  using Base::kGmemThreadsPerRow;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kNWarps = kNWarps_;
  static constexpr int kNThreads = Base::kNThreads;
  static constexpr int kAtomMSdP = kAtomMSdP_;
  static constexpr int kAtomNdKV = kAtomNdKV_;
  static constexpr int kAtomMdQ = kAtomMdQ_;
  static constexpr int kStages = kStages_;
  static_assert(kBlockN % 64 == 0, "P and dS are stored in 64-column swizzled atoms");
  static_assert(kStages == 1 || kStages == 2);
  static_assert(kNWarps % kAtomMSdP == 0 && kNWarps % kAtomNdKV == 0 && kNWarps % kAtomMdQ == 0);

  // A warp tile is 16 rows x 16 columns (two n8 atoms) so that one ldmatrix.x4 feeds a whole k16
  // step of either operand.
  template <int kWarpsAlongRows>
  using WarpTiledMma =
      cute::TiledMMA<cute::MMA_Atom<MmaOp>,
                     cute::Layout<cute::Shape<cute::Int<kWarpsAlongRows>, cute::Int<kNWarps / kWarpsAlongRows>, cute::_1>>,
                     cute::Tile<cute::Int<16 * kWarpsAlongRows>, cute::Int<16 * kNWarps / kWarpsAlongRows>, cute::_16>>;
  using TiledMmaSdP = WarpTiledMma<kAtomMSdP>;  // S, dP: (kBlockM, kBlockN), k = head_dim
  using TiledMmadKV = WarpTiledMma<kAtomNdKV>;  // dK, dV: (kBlockN, kHeadDim), k = kBlockM
  using TiledMmadQ = WarpTiledMma<kAtomMdQ>;    // dQ: (kBlockM, kHeadDim), k = kBlockN

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

  static_assert(kBlockM % (kNThreads / kGmemThreadsPerRow) == 0, "the load tiling must divide the query block");

  static constexpr int kSmemQdOElems = cute::cosize_v<SmemLayoutQdO>;
  static constexpr int kSmemKVElems = cute::cosize_v<SmemLayoutKV>;
  static constexpr int kSmemPdSElems = cute::cosize_v<SmemLayoutPdS>;
  // Q and dO (kStages buffers each), K, V, P, dS, then per query row lse_log2 and D (fp32,
  // kStages buffers each). dK and dV are staged through K's and V's tiles.
  static constexpr int kSmemBytes =
      (2 * kStages * kSmemQdOElems + 2 * kSmemKVElems + 2 * kSmemPdSElems) * int(sizeof(Element)) +
      2 * kStages * kBlockM * int(sizeof(float));
  // sm90 adds the dQ partials through shared memory (bwd_dq_accum.h): a kBlockM x kHeadDim fp32
  // staging tile after the rest. sm90 has 227 KB a CTA, so every head dim fits (d=256: 209 KB).
  static constexpr int kSmemBytesSm90 = kSmemBytes + kBlockM * kHeadDim * int(sizeof(float));
};

}  // namespace flashcore::cuda::sm80
