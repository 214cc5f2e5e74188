// sm90 bulk asynchronous reduce-add from shared to global memory (cp.reduce.async.bulk): one
// thread hands a contiguous run of fp32 values to the copy engine, which adds it into global
// memory in L2 without occupying the issuing warp's load/store queues. Used for the backward's
// dQ accumulation (docs/tuning/backward.md, v6), where per-thread atomics cost ~20%.
//
// Protocol, per staging buffer:
//   every writing thread: st.shared ...; fence_shared_to_async_proxy();
//   a barrier (or __syncwarp) over the writers;
//   one thread: bulk_reduce_add(...); bulk_commit();
//   that thread, before the buffer is written again: bulk_wait_read<0>(); then the barrier.
#pragma once

#include <cstdint>

namespace flashcore::cuda {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

// Makes this thread's earlier shared-memory stores visible to the async proxy (the copy engine).
__forceinline__ __device__ void fence_shared_to_async_proxy() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// gmem[0, bytes/4) += smem[0, bytes/4); both 16-byte aligned, bytes a multiple of 16.
__forceinline__ __device__ void bulk_reduce_add(float* gmem, const float* smem, int bytes) {
  const auto smem_addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(gmem),
               "r"(smem_addr), "r"(bytes)
               : "memory");
}

// Closes the group of bulk operations this thread issued since the last commit.
__forceinline__ __device__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

// Waits until at most kPending of this thread's committed groups still read their shared source.
template <int kPending>
__forceinline__ __device__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}

// Waits until at most kPending of this thread's committed groups are unfinished (writes done).
template <int kPending>
__forceinline__ __device__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
}

#endif

}  // namespace flashcore::cuda
