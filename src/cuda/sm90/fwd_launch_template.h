// Launch of the sm90 forward kernel for one (dtype, head dim): TMA descriptors built on the
// host from the caller's strides, the dynamic smem limit raised, the grid sized by the tile
// scheduler. Included only by src/cuda/instantiations/fwd_sm90_*.cu.
#pragma once

// Before any CuTe header: the N = 80/176/... wgmma shapes of the tile table (fwd_traits.h checks
// that every QK^T is one wgmma wide).
#ifndef CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#endif

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include <cute/tensor.hpp>

#include "cuda/common/cuda_check.h"
#include "cuda/sm90/fwd_kernel.h"
#include "cuda/sm90/fwd_launch.h"
#include "cuda/sm90/fwd_tile_size.h"
#include "cuda/sm90/fwd_traits.h"
#include "cuda/sm90/tile_scheduler.h"

namespace flashcore::cuda::sm90 {

template <class Traits>
typename Traits::Params make_fwd_kernel_params(const FwdParams& p) {
  using namespace cute;
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN, kHeadDim = Traits::kHeadDim;
  // The descriptors carry the real head_dim: TMA zero-fills columns past it, as it does rows
  // past seqlen.
  auto shape_q = make_shape(p.seqlen_q, p.head_dim, p.heads_q, p.batch);
  auto shape_k = make_shape(p.seqlen_k, p.head_dim, p.heads_kv, p.batch);
  auto shape_vt = make_shape(p.head_dim, p.seqlen_k, p.heads_kv, p.batch);
  Tensor mQ = make_tensor(make_gmem_ptr(static_cast<Element const*>(p.q)), shape_q,
                          make_stride(p.q_strides.row, _1{}, p.q_strides.head, p.q_strides.batch));
  Tensor mK = make_tensor(make_gmem_ptr(static_cast<Element const*>(p.k)), shape_k,
                          make_stride(p.k_strides.row, _1{}, p.k_strides.head, p.k_strides.batch));
  Tensor mVt = make_tensor(make_gmem_ptr(static_cast<Element const*>(p.v)), shape_vt,
                           make_stride(_1{}, p.v_strides.row, p.v_strides.head, p.v_strides.batch));
  typename Traits::SmemLayoutK smem_k;
  typename Traits::SmemLayoutVt smem_vt;
  return {
      make_tma_copy(SM90_TMA_LOAD{}, mQ, typename Traits::SmemLayoutQ{}, Shape<Int<kBlockM>, Int<kHeadDim>>{}, _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, mK, take<0, 2>(smem_k), Shape<Int<kBlockN>, Int<kHeadDim>>{}, _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, mVt, take<0, 2>(smem_vt), Shape<Int<kHeadDim>, Int<kBlockN>>{}, _1{}),
      shape_q,
      shape_k,
      shape_vt,
      p.out,
      p.o_strides.batch,
      p.o_strides.row,
      p.o_strides.head,
      p.lse,
      p.lse_strides.batch,
      p.lse_strides.head,
      p.seqlen_q,
      p.seqlen_k,
      p.head_dim,
      p.heads_q,
      p.batch,
      p.group_size,
      (p.seqlen_q + kBlockM - 1) / kBlockM,
      p.softmax_scale,
      p.scale_log2,
  };
}

// Non-causal tiles all cost the same: persistent CTAs with a static stride. Causal tiles do
// not: one tile per CTA by default, longest first (tile_scheduler.h).
template <class Traits, bool kPersistent = !Traits::kIsCausal>
Status launch_fwd(const FwdParams& p, cudaStream_t stream) {
  using Scheduler = FwdTileScheduler<kPersistent, Traits::kIsCausal>;
  auto kernel = &fwd_kernel<Traits, Scheduler>;
  constexpr int kSmemBytes = Traits::kSmemBytes;
  // The smem opt-in is per device; set it once per device rather than on every call (it is a
  // driver round trip that shows in small-shape latency).
  const int device = p.device.ordinal;
  static std::atomic<uint64_t> smem_configured{0};  // bit i: device i done (devices >= 64 always set)
  const uint64_t bit = device < 64 ? (uint64_t{1} << device) : 0;
  if (bit == 0 || !(smem_configured.load(std::memory_order_relaxed) & bit)) {
    FLASHCORE_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    smem_configured.fetch_or(bit, std::memory_order_relaxed);
  }

  const typename Traits::Params params = make_fwd_kernel_params<Traits>(p);
  const Scheduler scheduler{params.num_m_blocks, p.heads_q, p.batch};
  const int grid = Scheduler::grid_size(scheduler.num_tiles(), p.device.sm_count);
  kernel<<<grid, Traits::kThreads, kSmemBytes, stream>>>(params, scheduler);
  return cuda_status(cudaGetLastError(), "flashcore::forward: launching the sm90 forward kernel");
}

template <typename Element, int kHeadDim, bool kIsCausal>
using FwdTraitsFor =
    FwdTraits<Element, kHeadDim, fwd_tile_size(kHeadDim, kIsCausal).block_m, fwd_tile_size(kHeadDim, kIsCausal).block_n,
              fwd_tile_size(kHeadDim, kIsCausal).stages, kIsCausal, fwd_tile_size(kHeadDim, kIsCausal).ping_pong>;

template <typename Element, int kHeadDim>
Status run_fwd(const FwdParams& params, cudaStream_t stream) {
  return params.causal ? launch_fwd<FwdTraitsFor<Element, kHeadDim, true>>(params, stream)
                       : launch_fwd<FwdTraitsFor<Element, kHeadDim, false>>(params, stream);
}

}  // namespace flashcore::cuda::sm90
