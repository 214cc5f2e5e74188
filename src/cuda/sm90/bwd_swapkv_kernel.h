// The warp-specialised sm90 backward kernel of the transposed arrangement (d256;
// bwd_swapkv_traits.h): the roles, register reallocation and key-block loop of bwd_kernel.h, with
// BwdSwapKvMainloop's consumer step and BwdSwapKvEpilogue.
//
// Grid (n_blocks, heads_kv * kv_splits, batch), or (dq_accum slices, heads_kv * kv_splits, batch)
// in deterministic mode (kv_splits 1 in the looping instance). kKvSplit: clusters of
// (1, kv_splits, 1) CTAs split a kv head's query heads and sum dKᵀ/dVᵀ through distributed shared
// memory (bwd_swapkv_cluster_reduce.h; at GQA since device run 8). kRounds (with kSingleBlock):
// deterministic mode as a sequence of launches, launch params.key_block_round handling key blocks
// blockIdx.x + round * gridDim.x, each CTA column adding into its own dq_accum slice, the launches
// ordered by the stream (the library's deterministic mode since run 8; the looping instance,
// !kSingleBlock, is dev-only now). A cluster's CTAs share blockIdx.x, so a round's tail returns
// whole clusters and no CTA waits at a cluster barrier for one that left. The default mode's causal
// grid takes its tiles longest first over L2 sections (params.l2_section > 0: bwd_tile_order.h).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/cutlass.h>

#include "cuda/sm90/bwd_swapkv_cluster_reduce.h"
#include "cuda/sm90/bwd_swapkv_epilogue.h"
#include "cuda/sm90/bwd_swapkv_mainloop.h"
#include "cuda/sm90/bwd_tile_order.h"
#include "cuda/sm90/pipeline.h"

namespace flashcore::cuda::sm90 {

// kSingleBlock: one key block per CTA (the default mode), the loop folded away (bwd_kernel.h).
template <class Traits, bool kSingleBlock, bool kKvSplit = false, bool kRounds = false>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    bwd_swapkv_kernel(CUTE_GRID_CONSTANT typename Traits::Params const params) {
  static_assert(kSingleBlock || !kKvSplit, "the cluster sum is for the one-key-block-per-CTA kernel");
  static_assert(kSingleBlock || !kRounds, "rounds are launches of the one-key-block-per-CTA kernel");
  using Mainloop = BwdSwapKvMainloop<Traits>;
  using Epilogue = BwdSwapKvEpilogue<Traits>;
  using SharedStorage = typename Traits::SharedStorage;
  using Pipeline = typename Mainloop::Pipeline;

  if constexpr (kRounds) {
    if (int(blockIdx.x) + params.key_block_round * int(gridDim.x) >= params.n_blocks) return;  // the last round's tail
  }
  // The key block of iteration `it` (bwd_mainloop.h), shifted by the round; in the default mode's
  // causal grid, longest sweeps first over L2 sections (bwd_tile_order.h).
  auto block = [&params](int it) {
    if constexpr (kSingleBlock && !kRounds) {
      if (params.l2_section > 0) {
        const BwdTileCoord c =
            bwd_tile_in_l2_sections(int(blockIdx.x), int(blockIdx.y), int(blockIdx.z), int(gridDim.x),
                                    int(gridDim.y), int(gridDim.z), params.l2_section, params.kv_splits);
        return Mainloop::block_at(params, it, c.n_block, c.y, c.batch);
      }
    }
    BwdBlock b = Mainloop::block_of(params, it);
    if constexpr (kRounds) {
      b.n_block += params.key_block_round * int(gridDim.x);
      b.m_block_min = Mainloop::mask_of(params).m_block_min(b.n_block * Traits::kBlockN, Traits::kBlockM);
    }
    return b;
  };

  extern __shared__ char smem[];
  SharedStorage& shared = *reinterpret_cast<SharedStorage*>(smem);

  const int warp_idx = cutlass::canonical_warp_idx_sync();
  const int warp_group = cutlass::canonical_warp_group_idx();
  const bool lane_predicate = cute::elect_one_sync();

  if (warp_idx == 0 && lane_predicate) {
    cute::prefetch_tma_descriptor(params.tma_q.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_do.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_k.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_v.get_tma_descriptor());
    cutlass::arch::ClusterTransactionBarrier::init(&shared.barrier_kv, 1);
    cutlass::arch::ClusterBarrier::init(&shared.barrier_kv_empty, Traits::kConsumerWarps);
    Pipeline::init(shared.pipeline_q, Traits::kConsumerThreads);  // every consumer thread arrives
    Pipeline::init(shared.pipeline_do, Traits::kConsumerThreads);
  }
  cutlass::arch::fence_barrier_init();
  __syncthreads();

  const int num_iterations =
      kSingleBlock ? 1 : (params.n_blocks - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x);
  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegs>();
    if (warp_idx == 0 && lane_predicate) {
      typename Mainloop::State q_state, do_state;
      for (int it = 0; it < num_iterations; ++it) {
        Mainloop::load(params, shared, block(it), q_state, do_state);
      }
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegs>();
    const int thread_idx = int(threadIdx.x) - 128;
    typename Traits::TiledMmadKV mma_dkv;
    typename Mainloop::State q_state, do_state;
    int buf = 0;
    for (int it = 0; it < num_iterations; ++it) {
      const BwdBlock blk = block(it);
      cute::Tensor tdVrdV = cute::partition_fragment_C(mma_dkv, typename Traits::ShapedKV{});  // (MMA, MMA_d, MMA_N)
      cute::Tensor tdKrdK = cute::partition_fragment_C(mma_dkv, typename Traits::ShapedKV{});  // (MMA, MMA_d, MMA_N)
      Mainloop::mma(params, shared, blk, thread_idx, q_state, do_state, buf, tdVrdV, tdKrdK);
      if constexpr (kKvSplit) {
        BwdSwapKvClusterReduce<Traits>::sum_and_store(params, shared, blk, thread_idx, tdVrdV, tdKrdK);
        continue;
      }
      Epilogue::store(params, blk, thread_idx, tdVrdV, tdKrdK);
    }
  }
  // The producer warpgroup's part of the cluster sum: it only joins the cluster barriers.
  if constexpr (kKvSplit) {
    if (warp_group == 0) BwdSwapKvClusterReduce<Traits>::join();
  }
}

}  // namespace flashcore::cuda::sm90
