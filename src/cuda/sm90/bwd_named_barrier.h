// Named (bar.sync) barriers of the sm90 backward. Ids go through cutlass::arch::NamedBarrier's
// user interface, which offsets them past the 8 ids CUTLASS reserves. Separate from the
// forward's named_barrier.h: the two kernels never share a CTA, so their ids may overlap.
#pragma once

#include <cutlass/arch/barrier.h>

namespace flashcore::cuda::sm90 {

enum class BwdNamedBarrier : int {
  kDsReady = 0,  // both consumer warpgroups have stored their dS rows (the dQ product reads all)
  kKvReduce = 1,  // both consumer warpgroups are done with Q, dO and dS (bwd_cluster_reduce.h reuses them)
  kDqFull = 2,    // the consumers have staged this step's dQ partial (bwd_dq_writer.h)
  kDqEmpty = 3,   // the dQ writer warp's bulk reduce-add has read the staging tile
  kDropoutWords = 4,  // + warpgroup (4, 5): its 128 threads have stored this step's dropout words (bwd_dropout.h)
};

__forceinline__ __device__ void named_barrier_sync(int num_threads, BwdNamedBarrier id) {
  cutlass::arch::NamedBarrier::sync(num_threads, static_cast<int>(id));
}

__forceinline__ __device__ void named_barrier_arrive(int num_threads, BwdNamedBarrier id) {
  cutlass::arch::NamedBarrier::arrive(num_threads, static_cast<int>(id));
}

}  // namespace flashcore::cuda::sm90
