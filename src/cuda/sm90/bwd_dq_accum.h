// How the sm90 backward adds its dQ partials into dq_accum: each consumer warp stages its
// fragment of the TiledMmadQ accumulator in its own run of shared memory and one lane hands the
// run to the copy engine as a bulk reduce-add (the run layout and the bulk helpers are the common
// ones: common/dq_accumulate.h, common/bulk_reduce.h).
//
// Before the staging run is rewritten, lane 0 waits until the previous bulk op has *read* it
// (.read), so adds from successive query blocks overlap in flight. Deterministic mode needs the
// adds into one address to complete in a fixed order: with one CTA per dq_accum slice and each
// warp owning its run of a tile, it is enough that a warp's adds of one key block have completed
// before its adds of the next one start (dq_bulk_drain at the key-block boundary), since within a
// key block's sweep the warp adds into each tile once.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/common/bulk_reduce.h"
#include "cuda/common/dq_accumulate.h"

namespace flashcore::cuda::sm90 {

template <class Acc>
__forceinline__ __device__ void dq_bulk_add(Acc const& acc, float* tile, float* stage, int warp, int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kFragElems = decltype(cute::size(acc))::value;
  static_assert(kFragElems % kDqAccumVec == 0);
  constexpr int kRunElems = 32 * kFragElems;
  float* warp_stage = stage + warp * kRunElems;  // this warp's own run: no barrier beyond the warp
  if (lane == 0) bulk_wait_read<0>();
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
#endif
}

// Every add this warp issued has completed: before the staging buffer or the CTA goes away, and
// in deterministic mode before the next key block's adds.
__forceinline__ __device__ void dq_bulk_drain(int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (lane == 0) bulk_wait<0>();
  __syncwarp();
#endif
}

}  // namespace flashcore::cuda::sm90
