// The warp-specialised sm90 backward kernel: warp roles, register reallocation, one key block
// per CTA. No math here: bwd_mainloop.h computes, bwd_epilogue.h writes dK and dV.
//
// Grid (n_blocks, heads_kv * kv_splits, batch), or (dq_accum slices, heads_kv * kv_splits, batch)
// in deterministic mode, where each CTA walks several key blocks. Varlen (bwd_sequence.h): the
// default grid's x is the sequences' key-block slots (z = 1), and a CTA of an empty slot exits.
// kv_splits > 1 (GQA): clusters of (1, kv_splits, 1) CTAs split a kv head's query heads and sum dK/dV through
// distributed shared memory (bwd_cluster_reduce.h). Warpgroup 0 (producer) gives registers back and one elected
// lane of its warp 0 issues every TMA and bulk copy (and with Traits::kDqWriter its warp 1 sends the
// dQ partials: bwd_dq_writer.h); warpgroups 1 and 2 (consumers) take them.
// Both roles are branches of one if/else, so ptxas honours setmaxnreg.
#pragma once

#include <cute/arch/cluster_sm90.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/cutlass.h>

#include "cuda/sm90/bwd_cluster_reduce.h"
#include "cuda/sm90/bwd_dq_accum.h"
#include "cuda/sm90/bwd_dq_writer.h"
#include "cuda/sm90/bwd_epilogue.h"
#include "cuda/sm90/bwd_mainloop.h"
#include "cuda/sm90/pipeline.h"

namespace flashcore::cuda::sm90 {

// kSingleBlock: the grid has one CTA per key block (gridDim.x == n_blocks, the default mode), so
// the key-block loop collapses at compile time and its loop-carried state leaves the registers.
// kKvSplit: the CTA is one of a cluster of params.kv_splits that split the kv head's query heads,
// and dK/dV are summed over the cluster after each key block (bwd_cluster_reduce.h). A separate
// instance, so the kernels without it keep their register allocation (with the sum behind a
// runtime branch, ptxas spilled 40-144 B in every default-mode kernel). With the key-block loop
// (deterministic mode) the sum reuses the Q/dO/dS tiles, so the producer loads the next key
// block's tiles only once the cluster has finished summing this one.
template <class Traits, bool kSingleBlock, bool kKvSplit = false>
__global__ void __launch_bounds__(Traits::kThreads, 1) bwd_kernel(CUTE_GRID_CONSTANT typename Traits::Params const params) {
  using Mainloop = BwdMainloop<Traits>;
  using Epilogue = BwdEpilogue<Traits>;
  using DqWriter = BwdDqWriter<Traits>;
  using SharedStorage = typename Traits::SharedStorage;
  using Pipeline = typename Mainloop::Pipeline;

  extern __shared__ char smem[];
  SharedStorage& shared = *reinterpret_cast<SharedStorage*>(smem);

  // Varlen: a CTA of an empty key-block slot exits (whole warps: the slot search is warp-wide). The
  // CTAs of a cluster share blockIdx.x and z, so they exit together. Each warpgroup finds its work
  // again below, after setmaxnreg: a value live across the role split is held within the
  // producer's 24 registers, and ptxas spilled it (and reloaded it in the consumers' loop).
  if (kSingleBlock && bwd_is_varlen(params)) {
    const BwdWork work = BwdWork::of<Traits::kBlockN>(params, true);
    if (work.first_n_block >= work.n_blocks) return;
  }

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
    // Every consumer thread arrives on a Q/dO stage's empty barrier (bwd_mainloop.h says why), so
    // the arrival count is the consumer threads, not warps as in the forward.
    Pipeline::init(shared.pipeline_q, Traits::kConsumerThreads);
    Pipeline::init(shared.pipeline_do, Traits::kConsumerThreads);
  }
  cutlass::arch::fence_barrier_init();
  __syncthreads();

  // Key blocks first_n_block, first_n_block + gridDim.x, ... (one unless deterministic).
  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegs>();
    const BwdWork work = BwdWork::of<Traits::kBlockN>(params, kSingleBlock);
    const int num_iterations = kSingleBlock ? 1 : work.iterations();
    typename Mainloop::State q_state, do_state;
    // Warp 0's elected lane loads; with Traits::kDqWriter, warp 1 sends the dQ partials.
    constexpr bool kWriter = Traits::kDqWriter;
    if (kWriter && warp_idx == 1) DqWriter::begin();
    if constexpr (kKvSplit) {
      for (int it = 0; it < num_iterations; ++it) {
        if (warp_idx == 0 && lane_predicate) Mainloop::load(params, shared, Mainloop::block_of(params, work, it), q_state, do_state);
        if (kWriter && warp_idx == 1) DqWriter::write_block(params, shared.dq_stage.data(), Mainloop::block_of(params, work, it));
        // The producer warpgroup's part of the cluster sum: it joins the cluster barriers, and the
        // next key block's loads (into the tiles the sum reads) wait for the last one.
        BwdClusterReduce<Traits>::join();
      }
    } else if (warp_idx == 0 && lane_predicate) {
      for (int it = 0; it < num_iterations; ++it) {
        Mainloop::load(params, shared, Mainloop::block_of(params, work, it), q_state, do_state);
      }
    } else if (kWriter && warp_idx == 1) {
      for (int it = 0; it < num_iterations; ++it) {
        DqWriter::write_block(params, shared.dq_stage.data(), Mainloop::block_of(params, work, it));
      }
    }
    if (kWriter && warp_idx == 1) DqWriter::end();
  } else {
    cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegs>();
    const BwdWork work = BwdWork::of<Traits::kBlockN>(params, kSingleBlock);
    const int num_iterations = kSingleBlock ? 1 : work.iterations();
    const int thread_idx = int(threadIdx.x) - 128;
    typename Traits::TiledMmadKV mma_dkv;
    typename Mainloop::State q_state, do_state;
    int ds_buf = 0;
    for (int it = 0; it < num_iterations; ++it) {
      // Within one key block's sweep a warp adds into each dq_accum tile once, so only the previous
      // key block's adds (into the same tiles) must have completed: then every fp32 address sees
      // its additions in one fixed order, which deterministic mode needs (bwd_dq_accum.h).
      // (With the dQ writer warp, the writer orders them: bwd_dq_writer.h.)
      if (!kSingleBlock && !Traits::kDqWriter && it > 0) dq_bulk_drain(thread_idx % 32);
      const BwdBlock blk = Mainloop::block_of(params, work, it);
      cute::Tensor tdVrdV = cute::partition_fragment_C(mma_dkv, typename Traits::ShapedKV{});  // (MMA, MMA_N, MMA_d)
      cute::Tensor tdKrdK = cute::partition_fragment_C(mma_dkv, typename Traits::ShapedKV{});  // (MMA, MMA_N, MMA_d)
      Mainloop::mma(params, shared, blk, thread_idx, q_state, do_state, ds_buf, tdVrdV, tdKrdK);
      if constexpr (kKvSplit) {
        BwdClusterReduce<Traits>::sum_and_store(params, shared, blk, thread_idx, tdVrdV, tdKrdK);
        continue;
      }
      Epilogue::store(params, blk, thread_idx, tdVrdV, tdKrdK);
    }
    if constexpr (Traits::kDqWriter) {
      DqWriter::finish_consumer();
    } else {
      dq_bulk_drain(thread_idx % 32);
    }
  }
}

}  // namespace flashcore::cuda::sm90
