// A producer/consumer pipeline of kStages shared-memory buffers filled by TMA.
//
// Each stage has a "full" mbarrier (the producer arrives once with the transaction byte count;
// the TMA completes it) and an "empty" mbarrier (one arrival per consumer warp once its
// wgmma reading the stage has completed). CUTLASS's PipelineTmaAsync makes every consumer
// thread arrive; one arrival per warp is enough because wgmma completion is warp-collective.
//
// With kClusterM > 1 every stage is filled by a multicast from each CTA of the cluster, so a
// producer may refill a stage only once the consumers of every CTA are done with it: each
// consumer warp arrives on the empty barrier of every CTA in the cluster (its own included).
//
// Phases follow the mbarrier parity convention: a consumer waits on full[i] with the parity of
// its pass over the ring, the producer on empty[i] with the opposite parity (a fresh barrier
// counts as having completed the phase before its first, so the first pass does not block).
#pragma once

#include <cstdint>

#include <cute/arch/cluster_sm90.hpp>
#include <cutlass/arch/barrier.h>

namespace flashcore::cuda::sm90 {

template <int kStages>
struct PipelineState {
  int index = 0;
  uint32_t phase = 0;

  __forceinline__ __device__ void advance() {
    if (++index == kStages) {
      index = 0;
      phase ^= 1;
    }
  }
};

template <int kStages>
struct TmaPipelineStorage {
  uint64_t full[kStages];
  uint64_t empty[kStages];
};

template <int kStages, int kClusterM = 1>
struct TmaPipeline {
  using Barrier = cutlass::arch::ClusterBarrier;
  using TxBarrier = cutlass::arch::ClusterTransactionBarrier;
  using State = PipelineState<kStages>;

  TmaPipelineStorage<kStages>& storage;

  // One thread, before the CTA-wide (cluster-wide) sync that precedes any use. consumer_warps:
  // per CTA.
  __forceinline__ __device__ static void init(TmaPipelineStorage<kStages>& s, int consumer_warps) {
    for (int i = 0; i < kStages; ++i) {
      TxBarrier::init(&s.full[i], 1);
      Barrier::init(&s.empty[i], consumer_warps * kClusterM);
    }
  }

  // Producer: wait until stage `state.index` is free, announce `bytes`, return the barrier the
  // TMA must complete.
  __forceinline__ __device__ uint64_t& producer_acquire(State const& state, uint32_t bytes) {
    Barrier::wait(&storage.empty[state.index], state.phase ^ 1);
    TxBarrier::arrive_and_expect_tx(&storage.full[state.index], bytes);
    return storage.full[state.index];
  }

  // Producer, after its last acquire: wait until the consumers have released every stage, as the
  // next kStages acquires would. With a cluster this is what keeps the CTA alive until the other
  // CTAs' consumers have made their last (remote) arrivals on its empty barriers.
  __forceinline__ __device__ void producer_tail(State state) {
    for (int i = 0; i < kStages; ++i) {
      Barrier::wait(&storage.empty[state.index], state.phase ^ 1);
      state.advance();
    }
  }

  // Consumer: wait until the stage's bytes have landed.
  __forceinline__ __device__ void consumer_wait(State const& state) {
    TxBarrier::wait(&storage.full[state.index], state.phase);
  }

  // Consumer: every thread calls it after the wgmma reading the stage has completed; lane 0 of
  // each warp arrives.
  __forceinline__ __device__ void consumer_release(State const& state) {
    if constexpr (kClusterM == 1) {
      if (cutlass::canonical_lane_idx() == 0) Barrier::arrive(&storage.empty[state.index]);
    } else {
      const uint32_t lane0 = cutlass::canonical_lane_idx() == 0;
      for (uint32_t cta = 0; cta < kClusterM; ++cta) Barrier::arrive(&storage.empty[state.index], cta, lane0);
    }
  }
};

}  // namespace flashcore::cuda::sm90
