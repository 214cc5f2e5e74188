// The forward epilogue: O (fp32 registers) -> 16-bit -> stmatrix into Q's smem buffer -> one
// TMA store of the (kBlockM, d) tile, whose bounds drop rows past seqlen_q and columns past the
// real head_dim. The LSE rows go straight from registers to global memory.
#pragma once

#include <cute/arch/copy_sm90.hpp>
#include <cute/atom/copy_traits_sm90.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "cuda/sm90/fragment.h"
#include "cuda/sm90/named_barrier.h"
#include "cuda/sm90/tile_scheduler.h"

namespace flashcore::cuda::sm90 {

template <class Traits>
struct FwdEpilogue {
  using Element = typename Traits::Element;
  using Params = typename Traits::Params;
  using SharedStorage = typename Traits::SharedStorage;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kHeadDim = Traits::kHeadDim;

  template <class FragO, int kRows>
  __forceinline__ __device__ static void store(Params const& params, SharedStorage& shared, FragO const& tOrO,
                                               float const (&lse)[kRows], FwdTile const& tile, int thread_idx) {
    using namespace cute;
    Tensor sO = make_tensor(make_smem_ptr(shared.q.data()), typename Traits::SmemLayoutO{});  // (M, d)
    typename Traits::TiledMmaPV mma_pv;

    // Registers -> smem. Each warpgroup writes only its own rows, which only its own (completed)
    // QK^T products read as Q, so no barrier is needed before.
    Tensor rO = make_tensor<Element>(tOrO.layout());
    convert_into(tOrO, rO);
    auto smem_copy_o = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, Element>{}, mma_pv);
    auto thr_copy_o = smem_copy_o.get_thread_slice(thread_idx);
    Tensor taccOrO = thr_copy_o.retile_S(rO);   // ((Atom, AtomNum), MMA_M, MMA_N)
    Tensor taccOsO = thr_copy_o.partition_D(sO);  // ((Atom, AtomNum), PIPE_M, PIPE_N)
    copy(smem_copy_o, taccOrO, taccOsO);

    // LSE: the thread holding column 0 of a row writes it.
    if (params.lse != nullptr) {
      auto thr_pv = mma_pv.get_thread_slice(thread_idx);
      Tensor tOcO = thr_pv.partition_C(make_identity_tensor(select<0, 1>(typename Traits::TileShapePV{})));
      Tensor tOcO_rc = make_tensor(tOcO.data(), wgmma_acc_as_rows_cols(tOcO.layout()));  // (rows, d)
      if (get<1>(tOcO_rc(0, 0)) == 0) {
        float* lse_ptr = params.lse + tile.batch * params.lse_batch_stride + tile.head * params.lse_head_stride;
        CUTE_UNROLL
        for (int r = 0; r < kRows; ++r) {
          const int row = tile.m_block * kBlockM + get<0>(tOcO_rc(r, 0));
          if (row < params.seqlen_q) lse_ptr[row] = lse[r];
        }
      }
    }

    // Make the generic-proxy smem writes visible to the TMA (async proxy), then one thread
    // stores the tile and, once the TMA has read smem, frees the buffer for the next Q.
    cutlass::arch::fence_view_async_shared();
    named_barrier_sync(Traits::kConsumerThreads, FwdNamedBarrier::kEpilogue);
    if (thread_idx == 0) {
      Tensor mO = params.tma_o.get_tma_tensor(params.shape_q)(_, _, tile.head, tile.batch);  // (seqlen_q, d)
      Tensor gO = local_tile(mO, Shape<Int<kBlockM>, Int<kHeadDim>>{}, make_coord(tile.m_block, _0{}));  // (M, d)
      auto [tOgO, tOsO] = tma_partition(params.tma_o, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sO),
                                        group_modes<0, 2>(gO));
      copy(params.tma_o, tOsO, tOgO);
      tma_store_arrive();
      tma_store_wait<0>();
      cutlass::arch::ClusterBarrier::arrive(&shared.barrier_o);
    }
  }
};

}  // namespace flashcore::cuda::sm90
