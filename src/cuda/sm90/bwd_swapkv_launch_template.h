// Launch of the transposed-arrangement sm90 backward (d256; bwd_swapkv_traits.h): preprocess
// (which zeroes dq_accum) -> main -> convert on the stream, as run_bwd_with_traits does for the d <= 128
// kernels. Included at the end of bwd_launch_template.h (its run_bwd sends d > 128 here), so the
// parameter builder and the smem opt-in there are shared.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "cuda/common/cuda_check.h"
#include "cuda/sm80/bwd_preprocess.h"
#include "cuda/sm90/bwd_swapkv_convert_dq.h"
#include "cuda/sm90/bwd_swapkv_kernel.h"
#include "cuda/sm90/bwd_swapkv_traits.h"
#include "cuda/sm90/bwd_tile_size.h"

namespace flashcore::cuda::sm90 {

// kAllowKvSplit: GQA groups may be split over a cluster (bwd_kv_splits' rule) in the default mode.
template <class Traits, bool kSingleBlock, bool kAllowKvSplit = false>
Status launch_bwd_swapkv_kernel(const BwdParams& p, cudaStream_t stream) {
  typename Traits::Params params = make_bwd_kernel_params<Traits>(p);
  constexpr int kSmemBytes = Traits::kSmemBytes;
  if constexpr (kSingleBlock && kAllowKvSplit) {
    params.kv_splits = bwd_kv_splits(p, params.n_blocks);
    if (params.kv_splits > 1) {
      auto kernel = &bwd_swapkv_kernel<Traits, true, /*kKvSplit=*/true>;
      const Status opted_in = opt_in_bwd_smem_once<&bwd_swapkv_kernel<Traits, true, true>, kSmemBytes>(p.device.ordinal);
      if (!opted_in.ok()) return opted_in;
      if (!bwd_clusters_fit<Traits>(kernel, p.device.ordinal, params.kv_splits)) {
        params.kv_splits = 1;
      } else {
        const dim3 grid(params.n_blocks, p.heads_kv * params.kv_splits, p.batch);
        cudaLaunchAttribute cluster = cluster_dimension(1, static_cast<unsigned>(params.kv_splits));
        cudaLaunchConfig_t config = cluster_launch_config(grid, Traits::kThreads, kSmemBytes, stream, &cluster);
        return cuda_status(cudaLaunchKernelEx(&config, kernel, params),
                           "flashcore::backward: launching the sm90 backward kernel (head_dim > 128, query-head "
                           "groups split over clusters)");
      }
    }
  }
  const Status opted_in = opt_in_bwd_smem_once<&bwd_swapkv_kernel<Traits, kSingleBlock>, kSmemBytes>(p.device.ordinal);
  if (!opted_in.ok()) return opted_in;
  const dim3 grid(kSingleBlock ? params.n_blocks : p.num_splits, p.heads_kv, p.batch);
  bwd_swapkv_kernel<Traits, kSingleBlock><<<grid, Traits::kThreads, kSmemBytes, stream>>>(params);
  return cuda_status(cudaGetLastError(), "flashcore::backward: launching the sm90 backward kernel (head_dim > 128)");
}

// Deterministic mode by rounds (kRounds, dev variant 8): ceil(n_blocks / num_splits) launches of the
// single-block kernel on grid (num_splits, heads_kv, batch); launch r handles key blocks x + r
// num_splits, CTA column x adds into slice x, and the stream orders the launches, so every fp32
// address of dq_accum still receives its additions in one fixed order.
template <class Traits>
Status launch_bwd_swapkv_rounds(const BwdParams& p, cudaStream_t stream) {
  typename Traits::Params params = make_bwd_kernel_params<Traits>(p);
  constexpr int kSmemBytes = Traits::kSmemBytes;
  auto kernel = &bwd_swapkv_kernel<Traits, true, false, /*kRounds=*/true>;
  const Status opted_in = opt_in_bwd_smem_once<&bwd_swapkv_kernel<Traits, true, false, true>, kSmemBytes>(p.device.ordinal);
  if (!opted_in.ok()) return opted_in;
  const dim3 grid(p.num_splits, p.heads_kv, p.batch);
  const int rounds = (params.n_blocks + p.num_splits - 1) / p.num_splits;
  for (int r = 0; r < rounds; ++r) {
    params.key_block_round = r;
    kernel<<<grid, Traits::kThreads, kSmemBytes, stream>>>(params);
    FLASHCORE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  return Status::Ok();
}

// kAllowKvSplit (dev variant 7) and kDeterministicRounds (dev variant 8) are not yet run on a GPU;
// run_bwd_swapkv, what the library calls, has both off.
template <typename Element, int kHeadDim, bool kAllowKvSplit, bool kDeterministicRounds>
Status run_bwd_swapkv_with(const BwdParams& p, cudaStream_t stream) {
  constexpr BwdSwapKvTile kTile = bwd_swapkv_tile_size(kHeadDim);
  using Traits = BwdTraitsSwapKV<Element, kHeadDim, kTile.block_m, kTile.block_n, kTile.stages, false>;
  using TraitsCausal = BwdTraitsSwapKV<Element, kHeadDim, kTile.block_m, kTile.block_n, kTile.stages, true>;
  static_assert(kBwdSeqlenQRounding % Traits::kBlockM == 0 && kBwdSeqlenQRounding % sm80::kPreprocessRowsPerCta == 0);
  if (p.window_left >= 0 || (!p.causal && p.window_right >= 0) || p.has_score_mod) {
    return Status::NotSupported("flashcore::backward: the sm90 backward has no sliding window, softcap or ALiBi yet");
  }
  if (p.device.max_smem_per_block != 0 && p.device.max_smem_per_block < Traits::kSmemBytes) {
    return Status::NotSupported("flashcore::backward: the sm90 backward kernel for head_dim " +
                                std::to_string(p.head_dim) + " needs " + std::to_string(Traits::kSmemBytes) +
                                " bytes of shared memory per block; device " + std::to_string(p.device.ordinal) +
                                " offers " + std::to_string(p.device.max_smem_per_block));
  }
  // The preprocess also zeroes dq_accum, as in run_bwd_with_traits: the layout is the same (rows of
  // seqlen_q_rounded per (batch, query head), kHeadDim floats a row, a query block's tile one run of
  // kBlockM rows; plan_bwd_workspace with the kernel's head dim), so the memset pass goes.
  const dim3 preprocess_grid(p.seqlen_q_rounded / sm80::kPreprocessRowsPerCta, p.heads_q, p.batch);
  sm80::bwd_preprocess_kernel<Element, kHeadDim><<<preprocess_grid, sm80::kPreprocessThreads, 0, stream>>>(p);
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaGetLastError());

  // The default mode runs the single-block instance; deterministic mode the looping one, each CTA
  // column adding into its own dq_accum slice.
  Status status;
  if (p.deterministic) {
    if constexpr (kDeterministicRounds) {
      status = p.causal ? launch_bwd_swapkv_rounds<TraitsCausal>(p, stream) : launch_bwd_swapkv_rounds<Traits>(p, stream);
    } else {
      status = p.causal ? launch_bwd_swapkv_kernel<TraitsCausal, false>(p, stream)
                        : launch_bwd_swapkv_kernel<Traits, false>(p, stream);
    }
  } else {
    status = p.causal ? launch_bwd_swapkv_kernel<TraitsCausal, true, kAllowKvSplit>(p, stream)
                      : launch_bwd_swapkv_kernel<Traits, true, kAllowKvSplit>(p, stream);
  }
  if (!status.ok()) return status;

  const dim3 convert_grid((p.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM, p.heads_q, p.batch);
  bwd_swapkv_convert_dq_kernel<Traits><<<convert_grid, Traits::kConsumerThreads, 0, stream>>>(p);
  return cuda_status(cudaGetLastError(), "flashcore::backward: launching the sm90 dQ conversion kernel");
}

template <typename Element, int kHeadDim>
Status run_bwd_swapkv(const BwdParams& p, cudaStream_t stream) {
  return run_bwd_swapkv_with<Element, kHeadDim, /*kAllowKvSplit=*/false, /*kDeterministicRounds=*/false>(p, stream);
}

}  // namespace flashcore::cuda::sm90
