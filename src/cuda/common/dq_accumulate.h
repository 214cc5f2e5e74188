// How a backward kernel adds its fp32 dQ partials (dS K) into a dq_accum tile in global memory: two
// named policies with one interface, and the per-warp run layout both use.
//
// Run layout. A tile of kWarps * 32 * kFragElems values holds each warp's accumulator fragments in
// one contiguous run: warp w owns [w * 32 * kFragElems, (w + 1) * 32 * kFragElems), in which
// fragment values 4j .. 4j+3 of lane l sit at j * 128 + 4 l. So a warp's part of a tile is one
// block of memory (one bulk copy), and each 16-byte vector a warp stores or loads is one of 32
// consecutive ones (no bank conflicts, full sectors). Writers and readers (the conversion pass)
// compute offsets with dq_accum_offset().
//
// Policies (add(acc, tile, stage, warp, lane), then drain(lane) before the staging buffer or the
// CTA goes away, or a later partial adds to the same addresses):
//   DqBulkReduceAdd (sm90's copy engine): the warp stores its fragment into its own staging run in
//     shared memory and one lane issues cp.reduce.async.bulk .add.f32 of the run (bulk_reduce.h).
//     No barrier beyond the warp. +10-11% over atomics at 16k tokens (docs/tuning/backward.md v6).
//   DqAtomicAdd (any GPU): one fp32 atomic per value, same addresses; `stage` unused.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/common/bulk_reduce.h"

namespace flashcore::cuda {

inline constexpr int kDqAccumVec = 4;  // fp32 values per 16-byte vector

// Offset of fragment value i of `lane` inside its warp's run of 32 * kFragElems values.
template <int kFragElems>
__forceinline__ __device__ int dq_accum_offset_in_run(int lane, int i) {
  static_assert(kFragElems % kDqAccumVec == 0);
  return (i / kDqAccumVec) * (32 * kDqAccumVec) + lane * kDqAccumVec + i % kDqAccumVec;
}

// Offset inside a tile of fragment value i of (warp, lane), for fragments of kFragElems values.
template <int kFragElems>
__forceinline__ __device__ int dq_accum_offset(int warp, int lane, int i) {
  return warp * (32 * kFragElems) + dq_accum_offset_in_run<kFragElems>(lane, i);
}

struct DqAtomicAdd {
  static constexpr bool kUsesStaging = false;

  template <class Acc>
  __forceinline__ __device__ static void add(Acc const& acc, float* tile, float* /*stage*/, int warp, int lane) {
    constexpr int kFragElems = decltype(cute::size(acc))::value;
    CUTE_UNROLL
    for (int i = 0; i < kFragElems; ++i) atomicAdd(tile + dq_accum_offset<kFragElems>(warp, lane, i), acc(i));
  }

  __forceinline__ __device__ static void drain(int /*lane*/) {}
};

// Defined only where its instructions exist (bulk_reduce.h): code compiled for an older target
// cannot name it by mistake.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
struct DqBulkReduceAdd {
  static constexpr bool kUsesStaging = true;  // 32 * size(acc) floats per warp, 16-byte aligned

  // Issuing the bulk copy right after the dQ product, not at the end of the iteration, measured
  // 8-9% faster (tuning log v6).
  template <class Acc>
  __forceinline__ __device__ static void add(Acc const& acc, float* tile, float* stage, int warp, int lane) {
    constexpr int kFragElems = decltype(cute::size(acc))::value;
    static_assert(kFragElems % kDqAccumVec == 0);
    constexpr int kRunElems = 32 * kFragElems;
    float* warp_stage = stage + warp * kRunElems;  // this warp's own run: no barrier beyond the warp
    if (lane == 0) bulk_wait_read<0>();            // the previous bulk copy is done reading warp_stage
    __syncwarp();
    CUTE_UNROLL
    for (int i = 0; i < kFragElems; i += kDqAccumVec) {
      *reinterpret_cast<float4*>(warp_stage + dq_accum_offset_in_run<kFragElems>(lane, i)) =
          make_float4(acc(i), acc(i + 1), acc(i + 2), acc(i + 3));
    }
    fence_shared_to_async_proxy();  // this lane's values are visible to the copy engine
    __syncwarp();
    if (lane == 0) {
      bulk_reduce_add(tile + warp * kRunElems, warp_stage, kRunElems * int(sizeof(float)));
      bulk_commit();
    }
  }

  __forceinline__ __device__ static void drain(int lane) {
    if (lane == 0) bulk_wait<0>();
    __syncwarp();
  }
};
#endif

}  // namespace flashcore::cuda
