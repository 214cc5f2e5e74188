// The dQ writer warp of the sm90 backward (Traits::kDqWriter; issue 15's "bulk reduce-add (TMA)
// from a dedicated warp"): the consumers store each step's dQ partial into one shared staging tile
// (the per-warp run layout of common/dq_accumulate.h, so the tile is the dq_accum tile's image)
// and arrive on a named barrier; warp 1 of the producer warpgroup hands the whole tile to the copy
// engine as one bulk reduce-add, waits until the engine has read it, and frees the tile for the
// next step. The consumers never issue, commit or wait on a bulk operation themselves (with
// bwd_dq_accum.h each warp's lane 0 does, every step).
//
// Two named barriers over the 256 consumer threads and the writer warp, strictly alternating:
//   kDqEmpty: the writer arrives once at the start and once after each step's tile was read; the
//             consumers sync before each step's stores and once after their last step.
//   kDqFull:  the consumers arrive after their stores (+ fence.proxy.async); the writer syncs.
// Both sides count the same steps (each sweeps the CTA's key blocks, query heads and query blocks
// in the same order), so every sync meets exactly one generation of arrivals, and no arrival is
// left pending when the CTA exits.
//
// Deterministic mode: one writer thread issues every add of the CTA, and before the first add of
// each later key block it waits for the previous ones to complete (bulk_wait), as bwd_dq_accum.h's
// per-warp drain did: each fp32 address receives its additions in one fixed order.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>

#include "cuda/common/bulk_reduce.h"
#include "cuda/common/dq_accumulate.h"
#include "cuda/sm90/bwd_named_barrier.h"

namespace flashcore::cuda::sm90 {

template <class Traits>
struct BwdDqWriter {
  static constexpr int kBarrierThreads = Traits::kConsumerThreads + 32;
  static constexpr int kTileBytes = Traits::kBlockM * Traits::kHeadDim * int(sizeof(float));
  static_assert(Traits::kConsumerThreads * Traits::kDqFragElems * int(sizeof(float)) == kTileBytes);

  // Consumer side, every consumer thread, once per step: this thread's fragment into its run.
  template <class Acc>
  __forceinline__ __device__ static void stage(Acc const& acc, float* stage, int warp, int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int kFragElems = decltype(cute::size(acc))::value;
    float* warp_stage = stage + warp * (32 * kFragElems);
    named_barrier_sync(kBarrierThreads, BwdNamedBarrier::kDqEmpty);
    CUTE_UNROLL
    for (int i = 0; i < kFragElems; i += kDqAccumVec) {
      *reinterpret_cast<float4*>(warp_stage + dq_accum_offset_in_run<kFragElems>(lane, i)) =
          make_float4(acc(i), acc(i + 1), acc(i + 2), acc(i + 3));
    }
    fence_shared_to_async_proxy();  // visible to the copy engine once the writer has synced
    named_barrier_arrive(kBarrierThreads, BwdNamedBarrier::kDqFull);
#endif
  }

  // Consumer side, after the CTA's last step: matches the writer's last arrival.
  __forceinline__ __device__ static void finish_consumer() {
    named_barrier_sync(kBarrierThreads, BwdNamedBarrier::kDqEmpty);
  }

  // Writer side (all 32 lanes of the writer warp): before the first key block.
  __forceinline__ __device__ static void begin() { named_barrier_arrive(kBarrierThreads, BwdNamedBarrier::kDqEmpty); }

  // Writer side: every step of one key block (a BwdBlock, bwd_mainloop.h), in the consumers' order
  // (BwdMainloop::mma).
  template <class Block>
  __forceinline__ __device__ static void write_block(typename Traits::Params const& params, float const* stage,
                                                     Block const& blk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const bool leader = cutlass::canonical_lane_idx() == 0;  // the one thread that issues, commits and waits
    // Deterministic mode: the previous key block's adds (into the same tiles) complete first.
    if (blk.iteration > 0 && leader) bulk_wait<0>();
    float* dq_accum = params.dq_accum + (params.deterministic ? blockIdx.x * params.dq_accum_split_stride : 0);
    for (int head = blk.head_begin; head < blk.head_end; ++head) {
      // Rows of seqlen_q_rounded per (batch, query head), as BwdMainloop::row_stat_offset.
      float* dq_head =
          dq_accum + (static_cast<int64_t>(blk.batch) * params.heads_q + head) * params.seqlen_q_rounded * Traits::kHeadDim;
      // Not unrolled: the writer runs at the producer's 24 registers, and ptxas's 4 unrolled
      // copies kept 4 tile addresses live and spilled the dq_accum base (12-20 B in the causal
      // default-mode kernels at d128, session 12); one bulk add a consumer step costs nothing rolled.
#pragma unroll 1
      for (int m = blk.m_block_min; m < blk.m_block_max; ++m) {
        named_barrier_sync(kBarrierThreads, BwdNamedBarrier::kDqFull);
        if (leader) {
          bulk_reduce_add(dq_head + m * Traits::kBlockM * Traits::kHeadDim, stage, kTileBytes);
          bulk_commit();
          bulk_wait_read<0>();
        }
        __syncwarp();
        named_barrier_arrive(kBarrierThreads, BwdNamedBarrier::kDqEmpty);
      }
    }
#endif
  }

  // Writer side, after the last key block: every add has completed before the CTA exits.
  __forceinline__ __device__ static void end() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (cutlass::canonical_lane_idx() == 0) bulk_wait<0>();
    __syncwarp();
#endif
  }
};

}  // namespace flashcore::cuda::sm90
