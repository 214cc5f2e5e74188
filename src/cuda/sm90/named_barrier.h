// Named (bar.sync) barriers of the sm90 forward. Ids are passed to cutlass::arch::NamedBarrier's
// user interface, which offsets them past the 8 ids CUTLASS reserves.
#pragma once

#include <cutlass/arch/barrier.h>

namespace flashcore::cuda::sm90 {

enum class FwdNamedBarrier : int {
  kWarpSchedulerWG1 = 0,  // ping-pong: warpgroup i waits on kWarpSchedulerWG1 + i before its GEMMs
  kWarpSchedulerWG2 = 1,
  kWarpSchedulerWG3 = 2,
};

__forceinline__ __device__ void named_barrier_sync(int num_threads, FwdNamedBarrier id) {
  cutlass::arch::NamedBarrier::sync(num_threads, static_cast<int>(id));
}

__forceinline__ __device__ void named_barrier_arrive(int num_threads, FwdNamedBarrier id) {
  cutlass::arch::NamedBarrier::arrive(num_threads, static_cast<int>(id));
}

}  // namespace flashcore::cuda::sm90
