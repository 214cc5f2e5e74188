// The warp-specialised sm90 forward kernel: warp roles, register reallocation and the tile
// loop. No math here: fwd_mainloop.h computes, fwd_epilogue.h writes, tile_scheduler.h orders.
//
// Warpgroup 0 (producer) gives registers back (setmaxnreg.dec) and one elected lane of its
// warp 0 issues every TMA; warpgroups 1.. (consumers) take them (setmaxnreg.inc) and run the
// wgmma/softmax loop. Both roles are branches of one if/else, so ptxas honours setmaxnreg.
// Traits::kClusterM > 1: the CTAs of a cluster share their K/V loads (fwd_mainloop.h), synchronise
// across the cluster once after barrier set-up, and the producer waits out the last releases
// (load_tail) before its CTA may exit.
#pragma once

#include <cute/arch/cluster_sm90.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/cutlass.h>

#include "cuda/sm90/fwd_epilogue.h"
#include "cuda/sm90/fwd_mainloop.h"
#include "cuda/sm90/pipeline.h"
#include "cuda/sm90/tile_scheduler.h"

namespace flashcore::cuda::sm90 {

// kVariant: the plain kernel or an option kernel (fwd_score_options.h), whose options arrive in
// `options` (empty for the plain one).
template <class Traits, class Scheduler, FwdVariant kVariant = FwdVariant::kPlain>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    fwd_kernel(CUTE_GRID_CONSTANT typename Traits::Params const params, Scheduler const scheduler,
               CUTE_GRID_CONSTANT FwdOptionArgs<kVariant> const options) {
  using Mainloop = FwdMainloop<Traits, kVariant>;
  using Epilogue = FwdEpilogue<Traits>;
  using SharedStorage = typename Traits::SharedStorage;
  using Pipeline = typename Mainloop::Pipeline;

  extern __shared__ char smem[];
  SharedStorage& shared = *reinterpret_cast<SharedStorage*>(smem);

  const int warp_idx = cutlass::canonical_warp_idx_sync();
  const int warp_group = cutlass::canonical_warp_group_idx();
  const bool lane_predicate = cute::elect_one_sync();

  if (warp_idx == 0 && lane_predicate) {
    cute::prefetch_tma_descriptor(params.tma_q.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_k.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_v.get_tma_descriptor());
    for (int i = 0; i < Traits::kQStages; ++i) {
      cutlass::arch::ClusterTransactionBarrier::init(&shared.barrier_q[i], 1);
      cutlass::arch::ClusterBarrier::init(&shared.barrier_q_empty[i], Traits::kConsumerThreads / 32);
    }
    Pipeline::init(shared.pipeline_k, Traits::kConsumerThreads / 32);
    Pipeline::init(shared.pipeline_v, Traits::kConsumerThreads / 32);
  }
  cutlass::arch::fence_barrier_init();
  // With a cluster, the other CTAs multicast into this one's stages and arrive on its empty
  // barriers: every barrier of the cluster is initialised before anyone starts.
  if constexpr (Traits::kClusterM > 1) {
    cute::cluster_sync();
  } else {
    __syncthreads();
  }

  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegs>();
    if (warp_idx == 0 && lane_predicate) {
      typename Mainloop::State k_state, v_state;
      int iteration = 0;
      for (int t = scheduler.first_tile(); scheduler.valid(t); t = scheduler.next_tile(t), ++iteration) {
        Mainloop::load(params, options, shared, k_state, v_state, scheduler.decode(t), iteration, scheduler, t);
      }
      Mainloop::load_tail(shared, k_state, v_state);
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegs>();
    const int thread_idx = int(threadIdx.x) - 128;
    typename Mainloop::State k_state, v_state;
    int iteration = 0;
    typename Traits::TiledMmaPV mma_pv;
    Mainloop::mma_init(thread_idx);
    for (int t = scheduler.first_tile(); scheduler.valid(t); t = scheduler.next_tile(t), ++iteration) {
      const FwdTile tile = scheduler.decode(t);
      cute::Tensor tOrO = cute::partition_fragment_C(mma_pv, cute::select<0, 1>(typename Traits::TileShapePV{}));
      float lse[Mainloop::kRows];
      Mainloop::mma(params, options, shared, k_state, v_state, tile, iteration, thread_idx, tOrO, lse);
      Epilogue::store(params, tOrO, lse, tile, thread_idx);
    }
  }
}

}  // namespace flashcore::cuda::sm90
