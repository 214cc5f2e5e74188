// The warp-specialised sm90 backward kernel of the transposed arrangement (d256;
// bwd_swapkv_traits.h): the roles, register reallocation and key-block loop of bwd_kernel.h, with
// BwdSwapKvMainloop's consumer step and BwdSwapKvEpilogue. No GQA cluster split yet (a CTA sweeps
// its kv head's whole group).
//
// Grid (n_blocks, heads_kv, batch), or (dq_accum slices, heads_kv, batch) in deterministic mode.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/cutlass.h>

#include "cuda/sm90/bwd_swapkv_epilogue.h"
#include "cuda/sm90/bwd_swapkv_mainloop.h"
#include "cuda/sm90/pipeline.h"

namespace flashcore::cuda::sm90 {

// kSingleBlock: one key block per CTA (the default mode), the loop folded away (bwd_kernel.h).
template <class Traits, bool kSingleBlock>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    bwd_swapkv_kernel(CUTE_GRID_CONSTANT typename Traits::Params const params) {
  using Mainloop = BwdSwapKvMainloop<Traits>;
  using Epilogue = BwdSwapKvEpilogue<Traits>;
  using SharedStorage = typename Traits::SharedStorage;
  using Pipeline = typename Mainloop::Pipeline;

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
        Mainloop::load(params, shared, Mainloop::block_of(params, it), q_state, do_state);
      }
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegs>();
    const int thread_idx = int(threadIdx.x) - 128;
    typename Traits::TiledMmadKV mma_dkv;
    typename Mainloop::State q_state, do_state;
    int buf = 0;
    for (int it = 0; it < num_iterations; ++it) {
      const BwdBlock blk = Mainloop::block_of(params, it);
      cute::Tensor tdVrdV = cute::partition_fragment_C(mma_dkv, typename Traits::ShapedKV{});  // (MMA, MMA_d, MMA_N)
      cute::Tensor tdKrdK = cute::partition_fragment_C(mma_dkv, typename Traits::ShapedKV{});  // (MMA, MMA_d, MMA_N)
      Mainloop::mma(params, shared, blk, thread_idx, q_state, do_state, buf, tdVrdV, tdKrdK);
      Epilogue::store(params, blk, thread_idx, tdVrdV, tdKrdK);
    }
  }
}

}  // namespace flashcore::cuda::sm90
