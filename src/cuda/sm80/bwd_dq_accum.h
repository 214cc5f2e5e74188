// How the backward kernel adds its dQ partials (dS K, fp32) into the dq_accum workspace, and where
// the conversion pass finds them again.
//
// Tile layout. dq_accum holds one kBlockM x kHeadDim tile per (split, batch, query head, query
// block), contiguous, at the tile's row-major position (cuda/params.h). Inside a tile the values are
// not row-major but in the order the dQ MMA's accumulator fragments hold them: warp w owns the
// contiguous run [w * kWarpElems, (w + 1) * kWarpElems), in which fragment values 4j .. 4j+3 of
// lane l sit at j * 128 + 4 l. So a warp's part of the tile is one block of memory (one bulk
// copy), and each 16-byte vector a warp stores or loads is one of 32 consecutive ones (no bank
// conflicts, full sectors). Both sides compute offsets with dq_accum_offset().
//
// Adding a partial.
//   sm90: the warp stores its fragment into its own staging run in shared memory and one lane
//         issues a bulk reduce-add of the run into global memory (common/bulk_reduce.h). No
//         barrier beyond the warp: each warp has its own staging run. Measured against per-thread
//         float2 atomics: docs/tuning/backward.md v6.
//   sm80: fp32 atomics per value, same addresses.
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

#include "cuda/common/bulk_reduce.h"
#include "cuda/params.h"

namespace flashcore::cuda::sm80 {

inline constexpr int kDqAccumVec = 4;  // fp32 values per 16-byte vector

// Start of the tile of (batch, query head, query block starting at row m0) in one dq_accum slice.
template <int kHeadDim>
__forceinline__ __device__ std::int64_t dq_accum_tile_offset(const BwdParams& params, int batch, int head, int m0) {
  return ((static_cast<std::int64_t>(batch) * params.heads_q + head) * params.seqlen_q_rounded + m0) * kHeadDim;
}

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

// tile += this warp's dQ fragments. tile: the tile in global memory; stage: the CTA's staging
// tile in shared memory (kNWarps runs of 32 * size(acc) floats, 16-byte aligned; unused on sm80).
// Issuing the bulk copy right after the dQ product, not at the end of the iteration, measured
// 8-9% faster (tuning log v6).
template <class Acc>
__forceinline__ __device__ void add_dq_partial(Acc const& acc, float* tile, float* stage, int warp, int lane) {
  using namespace cute;
  constexpr int kFragElems = decltype(size(acc))::value;
  static_assert(kFragElems % kDqAccumVec == 0);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kRunElems = 32 * kFragElems;
  float* warp_stage = stage + warp * kRunElems;  // this warp's own run: no barrier beyond the warp
  if (lane == 0) bulk_wait_read<0>();  // the previous bulk copy is done reading warp_stage
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
#else
  (void)stage;
  CUTE_UNROLL
  for (int i = 0; i < kFragElems; ++i) atomicAdd(tile + dq_accum_offset<kFragElems>(warp, lane, i), acc(i));
#endif
}

// Waits until this warp's partials have reached global memory (call before the staging buffer or
// the CTA goes away, and before a later partial may add to the same addresses).
__forceinline__ __device__ void drain_dq_partials(int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (lane == 0) bulk_wait<0>();
  __syncwarp();
#else
  (void)lane;
#endif
}

}  // namespace flashcore::cuda::sm80
