// Dev-only (issue 14, session 9 round 2): the sm90 forward kernel of fwd_kernel.h with %globaltimer
// stamps per CTA, to say where a launch's idle SM time goes (start-up, tile boundaries, the last
// tile's epilogue, the gap between launches). Never shipped: the library's kernel has no stamps.
// Same roles, mainloop and epilogue as fwd_kernel.h; only the stamps are added (one st.global each,
// by one thread of a role, so the timed kernel runs within noise of the plain one).
//
// Per CTA, kTimelineSlots u64 at times[cta * kTimelineSlots]:
//   [0] entry (thread 0)  [1] barriers initialised  [2] producer done (after load_tail)
//   [3 + wg] exit of consumer warpgroup wg (0/1)  [5] %smid  [6 + wg] tiles run by warpgroup wg
//   [8 + wg * 3 * kTimelineTiles + 3 * i + {0, 1, 2}] tile i of warpgroup wg: mainloop entered,
//   epilogue entered (the tile's last PV done), epilogue left (O and LSE stored)
#pragma once

#include <cstdint>

#include "cuda/sm90/fwd_launch_template.h"

namespace fc_dev_timeline {

constexpr int kTimelineTiles = 40;
constexpr int kTimelineSlots = 8 + 2 * 3 * kTimelineTiles;

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Epilogue: the library's FwdEpilogue, or a dev alternative with the same store() (s10_epilogue_vec16.h).
template <class Traits, class Scheduler, class Epilogue = flashcore::cuda::sm90::FwdEpilogue<Traits>>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    fwd_kernel_timed(CUTE_GRID_CONSTANT typename Traits::Params const params, Scheduler const scheduler,
                     uint64_t* __restrict__ times) {
  using namespace flashcore::cuda;
  using namespace flashcore::cuda::sm90;
  constexpr FwdVariant kVariant = FwdVariant::kPlain;
  using Mainloop = FwdMainloop<Traits, kVariant>;
  using SharedStorage = typename Traits::SharedStorage;
  using Pipeline = typename Mainloop::Pipeline;
  const FwdOptionArgs<kVariant> options{};
  uint64_t* const my = times + size_t(blockIdx.x) * kTimelineSlots;
  if (threadIdx.x == 0) {
    my[0] = global_ns();
    uint32_t smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    my[5] = smid;
  }

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
  __syncthreads();
  if (threadIdx.x == 0) my[1] = global_ns();

  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegs>();
    if (warp_idx == 0 && lane_predicate) {
      typename Mainloop::State k_state, v_state;
      int iteration = 0;
      for (int t = scheduler.first_tile(); scheduler.valid(t); t = scheduler.next_tile(t), ++iteration) {
        Mainloop::load(params, options, shared, k_state, v_state, scheduler.decode(t), iteration, scheduler, t);
      }
      Mainloop::load_tail(shared, k_state, v_state);
      my[2] = global_ns();
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegs>();
    const int thread_idx = int(threadIdx.x) - 128;
    const int wg = thread_idx / 128;
    const bool stamper = thread_idx % 128 == 0 && wg < 2;
    uint64_t* const mine = my + 8 + wg * 3 * kTimelineTiles;
    typename Mainloop::State k_state, v_state;
    int iteration = 0;
    typename Traits::TiledMmaPV mma_pv;
    Mainloop::mma_init(thread_idx);
    for (int t = scheduler.first_tile(); scheduler.valid(t); t = scheduler.next_tile(t), ++iteration) {
      const FwdTile tile = scheduler.decode(t);
      const bool stamp = stamper && iteration < kTimelineTiles;
      if (stamp) mine[3 * iteration] = global_ns();
      cute::Tensor tOrO = cute::partition_fragment_C(mma_pv, cute::select<0, 1>(typename Traits::TileShapePV{}));
      float lse[Mainloop::kRows];
      Mainloop::mma(params, options, shared, k_state, v_state, tile, iteration, thread_idx, tOrO, lse);
      if (stamp) mine[3 * iteration + 1] = global_ns();
      Epilogue::store(params, tOrO, lse, tile, thread_idx);
      if (stamp) mine[3 * iteration + 2] = global_ns();
    }
    if (stamper) {
      my[3 + wg] = global_ns();
      my[6 + wg] = uint64_t(iteration);
    }
  }
}

// The timeline buffer: kLaunches launches' stamps, filled in turn (a counter on the host), so a
// burst of back-to-back launches shows the gap between them.
constexpr int kLaunches = 4;
constexpr int kMaxCtas = 1024;
uint64_t* timeline_buffer();
int& timeline_next();

// Non-causal persistent, as launch_fwd launches the plain non-causal kernel.
template <class Traits, class Epilogue = flashcore::cuda::sm90::FwdEpilogue<Traits>>
flashcore::Status launch_timed(const flashcore::cuda::FwdParams& p, cudaStream_t stream) {
  using namespace flashcore::cuda::sm90;
  using Scheduler = FwdTileScheduler<true, false>;
  static_assert(!Traits::kIsCausal && Traits::kClusterM == 1, "timeline: non-causal, no clusters");
  auto kernel = &fwd_kernel_timed<Traits, Scheduler, Epilogue>;
  constexpr int kSmemBytes = Traits::kSmemBytes;
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  const typename Traits::Params params = make_fwd_kernel_params<Traits>(p);
  const Scheduler scheduler{params.num_m_blocks, p.heads_q, p.batch};
  const int grid = Scheduler::grid_size(scheduler.num_tiles(), p.device.sm_count);
  if (grid > kMaxCtas) return flashcore::Status::NotSupported("timeline: grid too large");
  uint64_t* buf = timeline_buffer();
  if (buf == nullptr) return flashcore::Status::NotSupported("timeline: no buffer");
  const int slot = timeline_next();
  timeline_next() = (slot + 1) % kLaunches;
  kernel<<<grid, Traits::kThreads, kSmemBytes, stream>>>(params, scheduler,
                                                         buf + size_t(slot) * kMaxCtas * kTimelineSlots);
  return flashcore::cuda::cuda_status(cudaGetLastError(), "timeline launch");
}

}  // namespace fc_dev_timeline
