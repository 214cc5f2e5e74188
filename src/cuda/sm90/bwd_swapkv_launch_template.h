// Launch of the transposed-arrangement sm90 backward (d256; bwd_swapkv_traits.h): its main-kernel
// instances, run inside the shared pass (run_bwd_pass: preprocess, which zeroes dq_accum -> main ->
// convert). Included at the end of bwd_launch_template.h (its run_bwd sends d > 128 here), so the
// pass, the parameter builder, the split rule and the smem opt-in there are shared.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/common/cuda_check.h"
#include "cuda/sm90/bwd_swapkv_kernel.h"
#include "cuda/sm90/bwd_swapkv_traits.h"
#include "cuda/sm90/bwd_tile_order.h"
#include "cuda/sm90/bwd_tile_size.h"

namespace flashcore::cuda::sm90 {

// CTAs (a cluster along y) that split a kv head's group of query heads at d > 128; `columns` is
// the grid's x (key blocks, or dq_accum slices in deterministic mode's rounds).
// Measured on the H100 (docs/tuning/backward_sm90.md, run 8; bf16 d256, 8 query heads, GQA 8:1
// and 4:1, 2k-16k): causal, where the sweeps are uneven and a few waves leave a long tail, 2 CTAs
// a group took 0.53-0.59x cuDNN to 0.84-0.91x at 8:1 and 0.79-0.88x to 0.85-0.98x at 4:1, and 4
// beat 2 in only 2 of the 6 causal cells: bwd_kv_splits' rule, as the d128 kernel. Non-causal,
// every CTA sweeps the same length, and on grids of 2-4 waves the split lost 1-7 % (its second
// K/V load and the DSMEM sum buy no balance there): only a grid that leaves SMs idle is split,
// by the largest split that still fits in one wave. A deterministic round is such a grid (at most
// a wave of CTAs of about equal sweeps; at GQA 8:1 and batch 1 only 16 of 132 SMs work), so it
// takes the same rule.
// Causal with groups of 8 or more from 8k queries on, 4 CTAs where bwd_kv_splits says 2: in a causal
// grid the CTAs of a group drift apart (key block n sweeps seqlen/64 - n query blocks of each of
// its heads), so together they stream every head of their share of the group; 2 heads a CTA
// instead of 4 halves that. Measured (bf16, GQA 8:1; session 11 d256 run 2, session 9 run 8):
// 8k +6.5 %, 16k +10 %; at 2k-4k -5 to +4 % (left at 2); at GQA 4:1 (1 head a CTA) 4 lost 5-12 %.
inline int bwd_swapkv_kv_splits(const BwdParams& p, int columns) {
  if (p.forced_kv_splits > 0) return bwd_kv_splits(p, columns);
  if (p.causal && !p.deterministic) {
    const int splits = bwd_kv_splits(p, columns);
    const bool long_causal_group = p.group_size >= 8 && p.group_size % 4 == 0 && p.seqlen_q >= 8192;
    return splits == 2 && long_causal_group ? 4 : splits;
  }
  const std::int64_t ctas = static_cast<std::int64_t>(columns) * p.heads_kv * p.batch;
  const std::int64_t wave = p.device.sm_count > 0 ? p.device.sm_count : 132;
  for (const int splits : {4, 2}) {
    if (p.group_size % splits == 0 && ctas * splits <= wave) return splits;
  }
  return 1;
}

// kAllowKvSplit: GQA groups may be split over a cluster (bwd_swapkv_kv_splits) in the default mode.
// The default mode's causal grid runs longest sweeps first over L2 sections (bwd_tile_order.h).
template <class Traits, bool kSingleBlock, bool kAllowKvSplit = false>
Status launch_bwd_swapkv_kernel(const BwdParams& p, cudaStream_t stream) {
  typename Traits::Params params = make_bwd_kernel_params<Traits>(p);
  constexpr int kSmemBytes = Traits::kSmemBytes;
  if constexpr (kSingleBlock && Traits::kIsCausal) {
    params.l2_section = bwd_l2_section_units(Traits::kIsCausal, p.heads_kv * p.batch, p.group_size, p.seqlen_q,
                                             Traits::kHeadDim, int(sizeof(typename Traits::Element)));
    if (p.forced_l2_section > 0) params.l2_section = p.forced_l2_section;
  }
  if constexpr (kSingleBlock && kAllowKvSplit) {
    params.kv_splits = bwd_swapkv_kv_splits(p, params.n_blocks);
    const Status valid = check_kv_splits(p, params.kv_splits);
    if (!valid.ok()) return valid;
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

// Deterministic mode by rounds (kRounds): ceil(n_blocks / num_splits) launches of the
// single-block kernel on grid (num_splits, heads_kv, batch); launch r handles key blocks x + r
// num_splits, CTA column x adds into slice x, and the stream orders the launches, so every fp32
// address of dq_accum still receives its additions in one fixed order. It replaced the looping
// kernel (508 / 708 B of spills at d256): +13 to +23 % for MHA on the H100, up to +35 % at GQA
// (docs/tuning/backward_sm90.md, run 8). kAllowKvSplit: a round's GQA groups split over clusters
// (bwd_swapkv_kv_splits); the CTAs of a cluster sweep different query heads, so each dq_accum
// address still has one writer a round, and dK/dV are summed in cluster rank order.
template <class Traits, bool kAllowKvSplit>
Status launch_bwd_swapkv_rounds(const BwdParams& p, cudaStream_t stream) {
  typename Traits::Params params = make_bwd_kernel_params<Traits>(p);
  constexpr int kSmemBytes = Traits::kSmemBytes;
  const int rounds = (params.n_blocks + p.num_splits - 1) / p.num_splits;
  if constexpr (kAllowKvSplit) {
    params.kv_splits = bwd_swapkv_kv_splits(p, p.num_splits);
    const Status valid = check_kv_splits(p, params.kv_splits);
    if (!valid.ok()) return valid;
    auto split_kernel = &bwd_swapkv_kernel<Traits, true, /*kKvSplit=*/true, /*kRounds=*/true>;
    if (params.kv_splits > 1) {
      const Status opted_in =
          opt_in_bwd_smem_once<&bwd_swapkv_kernel<Traits, true, true, true>, kSmemBytes>(p.device.ordinal);
      if (!opted_in.ok()) return opted_in;
      if (!bwd_clusters_fit<Traits>(split_kernel, p.device.ordinal, params.kv_splits)) params.kv_splits = 1;
    }
    if (params.kv_splits > 1) {
      const dim3 grid(p.num_splits, p.heads_kv * params.kv_splits, p.batch);
      cudaLaunchAttribute cluster = cluster_dimension(1, static_cast<unsigned>(params.kv_splits));
      cudaLaunchConfig_t config = cluster_launch_config(grid, Traits::kThreads, kSmemBytes, stream, &cluster);
      for (int r = 0; r < rounds; ++r) {
        params.key_block_round = r;
        FLASHCORE_CUDA_RETURN_IF_ERROR(cudaLaunchKernelEx(&config, split_kernel, params));
      }
      return Status::Ok();
    }
  }
  auto kernel = &bwd_swapkv_kernel<Traits, true, false, /*kRounds=*/true>;
  const Status opted_in = opt_in_bwd_smem_once<&bwd_swapkv_kernel<Traits, true, false, true>, kSmemBytes>(p.device.ordinal);
  if (!opted_in.ok()) return opted_in;
  const dim3 grid(p.num_splits, p.heads_kv, p.batch);
  for (int r = 0; r < rounds; ++r) {
    params.key_block_round = r;
    kernel<<<grid, Traits::kThreads, kSmemBytes, stream>>>(params);
    FLASHCORE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  return Status::Ok();
}

// kAllowKvSplit: the GQA cluster split (default mode, and deterministic mode's rounds);
// kDeterministicRounds: deterministic mode by rounds of the single-block kernel, else the looping
// kernel. The library (run_bwd_swapkv) has both on since device run 8.
template <typename Element, int kHeadDim, bool kAllowKvSplit, bool kDeterministicRounds>
Status run_bwd_swapkv_with(const BwdParams& p, cudaStream_t stream) {
  constexpr BwdTileSize kTile = bwd_swapkv_tile_size(kHeadDim);
  using Traits = BwdTraitsSwapKV<Element, kHeadDim, kTile.block_m, kTile.block_n, kTile.stages, false>;
  using TraitsCausal = BwdTraitsSwapKV<Element, kHeadDim, kTile.block_m, kTile.block_n, kTile.stages, true>;
  // The default mode runs the single-block instance (GQA groups split over a cluster where
  // bwd_swapkv_kv_splits says); deterministic mode the rounds or the looping instance, each CTA
  // column adding into its own dq_accum slice.
  return run_bwd_pass<Traits>(p, stream, [&]() -> Status {
    if (!p.deterministic) {
      return p.causal ? launch_bwd_swapkv_kernel<TraitsCausal, true, kAllowKvSplit>(p, stream)
                      : launch_bwd_swapkv_kernel<Traits, true, kAllowKvSplit>(p, stream);
    }
    if constexpr (kDeterministicRounds) {
      return p.causal ? launch_bwd_swapkv_rounds<TraitsCausal, kAllowKvSplit>(p, stream)
                      : launch_bwd_swapkv_rounds<Traits, kAllowKvSplit>(p, stream);
    } else {
      return p.causal ? launch_bwd_swapkv_kernel<TraitsCausal, false>(p, stream)
                      : launch_bwd_swapkv_kernel<Traits, false>(p, stream);
    }
  });
}

template <typename Element, int kHeadDim>
Status run_bwd_swapkv(const BwdParams& p, cudaStream_t stream) {
  return run_bwd_swapkv_with<Element, kHeadDim, /*kAllowKvSplit=*/true, /*kDeterministicRounds=*/true>(p, stream);
}

}  // namespace flashcore::cuda::sm90
