// Launch of sm90's cluster decode kernel (decode_cluster_kernel.h) for one (dtype, head dim): the
// append when there are new tokens, then the decode grid in clusters of num_splits CTAs. The split
// count comes from the caller or from common/decode_splits.h's heuristic capped at the largest
// cluster (16); no split workspace.
//
// Which problems it keeps for the cluster kernel (kernels=auto; FLASHCORE_DECODE_CLUSTER=on takes
// every problem, =off none, for tests and A/B runs): contiguous caches (paged ones measured no faster
// on it with 8 warps at 3 stages, v9, or 12 at 2, v10) with a merge to save, i.e. more than one
// split, at most 16, head_dim above half the kernel's (d <= 64 has its own sm80 kernel), and a grid
// whose clusters are all resident at once (a cluster lives in one GPC:
// cudaOccupancyMaxActiveClusters). The rest go to DecodeParams::fallback, the sm80 row, unchanged.
// docs/kvcache.md, v9 and v10.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "cuda/common/cuda_check.h"
#include "cuda/common/decode_grid.h"
#include "cuda/params.h"
#include "cuda/sm80/decode_mma_kernel.h"
#include "cuda/sm90/cluster_launch.h"
#include "cuda/sm90/decode_cluster_kernel.h"
#include "cuda/sm90/decode_launch.h"

namespace flashcore::cuda::sm90 {

enum class ClusterDecode { kAuto, kOn, kOff };

#if defined(FLASHCORE_DECODE_AB_VARIANTS)
// An A/B variant's CTA: run_decode's schedule for the layout, kWarps warps, kStages stages.
template <typename Element, int kHeadDim, bool kPaged, int kWarps, int kStages>
using DecodeTraitsAB = sm80::DecodeMmaTraits<Element, kHeadDim, kStages, kPaged, 1,
                                             kPaged ? sm80::kScheduleContiguous : sm80::kScheduleStrided, 16, false,
                                             false, true, kWarps>;
#endif

// FLASHCORE_DECODE_CLUSTER (read once): "on" / "off" / anything else = auto. Builds with
// FLASHCORE_DECODE_AB_VARIANTS also read FLASHCORE_DECODE_AB at every call ("sm80": off, "cluster":
// on), so bench/kvcache_decode.py --ab times both in one process.
inline ClusterDecode cluster_decode_mode() {
#if defined(FLASHCORE_DECODE_AB_VARIANTS)
  if (const char* ab = std::getenv("FLASHCORE_DECODE_AB"); ab != nullptr) {
    if (std::strcmp(ab, "sm80") == 0) return ClusterDecode::kOff;
    if (std::strcmp(ab, "cluster") == 0) return ClusterDecode::kOn;
  }
#endif
  static const ClusterDecode mode = [] {
    const char* env = std::getenv("FLASHCORE_DECODE_CLUSTER");
    if (env != nullptr && std::strcmp(env, "on") == 0) return ClusterDecode::kOn;
    if (env != nullptr && std::strcmp(env, "off") == 0) return ClusterDecode::kOff;
    return ClusterDecode::kAuto;
  }();
  return mode;
}

// Clusters of `size` CTAs of `kernel` the device holds at once (the driver's answer, asked once per
// device, kernel and size).
template <class Kernel>
Status resident_clusters(Kernel kernel, const DecodeParams& p, int threads, int smem_bytes, int size, int* clusters) {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices][kMaxClusterSplits + 1] = {};  // value + 1; 0: not asked yet
  const bool cacheable = p.device.ordinal >= 0 && p.device.ordinal < kDevices;
  if (cacheable && known[p.device.ordinal][size].load(std::memory_order_relaxed) > 0) {
    *clusters = known[p.device.ordinal][size].load(std::memory_order_relaxed) - 1;
    return Status::Ok();
  }
  cudaLaunchAttribute cluster = cluster_dimension(static_cast<unsigned>(size), 1);
  const cudaLaunchConfig_t config = cluster_launch_config(dim3(size), threads, smem_bytes, nullptr, &cluster);
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveClusters(clusters, kernel, &config));
  if (cacheable) known[p.device.ordinal][size].store(*clusters + 1, std::memory_order_relaxed);
  return Status::Ok();
}

template <class Traits>
Status launch_cluster_decode(const DecodeParams& params, cudaStream_t stream, ClusterDecode mode) {
  using Element = typename Traits::Element;
  constexpr int kSmem = Traits::kSmemBytes;
  const bool auto_mode = mode == ClusterDecode::kAuto && params.fallback != nullptr;
  if (mode == ClusterDecode::kOff && params.fallback != nullptr) return params.fallback(params, stream);
  // Paged caches stay on sm80 (batch 8 page 16 on the cluster kernel: v9 100.9 us against 99.3, v10's
  // 12-warp CTA 99.1 against 98.9; batch 1 page 16, 9 splits of 12 warps, 21.1 against 20.4).
  if (auto_mode && (params.head_dim <= Traits::kHeadDim / 2 || params.num_splits > kMaxClusterSplits ||
                    params.block_table != nullptr)) {
    return params.fallback(params, stream);
  }
  const auto kernel = &decode_cluster_kernel<Traits>;
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));

  DecodeGrid grid;
  FLASHCORE_RETURN_IF_ERROR(decode_grid<Traits>(params, kernel, kMaxClusterSplits, &grid));
  const int num_splits = grid.num_splits;
  if (auto_mode) {
    if (num_splits == 1) return params.fallback(params, stream);  // no merge to save
    // One wave of clusters or none: the heuristic counted SM slots, but a cluster needs its CTAs in
    // one GPC, so fewer clusters fit than slots / size (v9: the H100 holds 7 clusters of 16, 15 of
    // 8, 22 of 5 at one CTA a SM). Batch 1 (8 clusters of 16) took two waves: 33.1 us against
    // sm80's 20.4. Only single-wave grids were measured faster (batch 8: 64 clusters of 2, 66 fit).
    int clusters = 0;
    FLASHCORE_RETURN_IF_ERROR(resident_clusters(kernel, params, Traits::kThreads, kSmem, num_splits, &clusters));
    if (grid.base_ctas > clusters) return params.fallback(params, stream);
  }

  DecodeParams p = params;
  p.num_splits = num_splits;
  p.o_accum = nullptr;  // the partials stay in shared memory
  p.lse_accum = nullptr;
  p.split_counters = nullptr;
  p.fallback = nullptr;
  if (p.seqlen_new > 0) {
    decode_append_kernel<Element><<<dim3(p.seqlen_new, p.heads_kv, p.batch), 64, 0, stream>>>(p);
    FLASHCORE_RETURN_IF_ERROR(cuda_status(cudaGetLastError(), "flashcore::forward_kvcache: launching the append kernel"));
  }
  cudaLaunchAttribute cluster = cluster_dimension(static_cast<unsigned>(num_splits), 1);
  const cudaLaunchConfig_t config =
      cluster_launch_config(dim3(num_splits, p.heads_kv * grid.m_blocks, p.batch), Traits::kThreads, kSmem, stream, &cluster);
  return cuda_status(cudaLaunchKernelEx(&config, kernel, p), "flashcore::forward_kvcache: launching the cluster decode kernel");
}

// Contiguous caches: strided splits (sm80's choice since v8); paged: contiguous runs of tiles with
// the page offsets found one lane a key (v6, v8). 3 stages, 8 warps: 200 KB at d128, one CTA a SM.
template <typename Element, int kHeadDim>
Status run_decode(const DecodeParams& params, cudaStream_t stream) {
  constexpr int kWarps = 8;
  constexpr bool kLightCount = true;  // unused: no global merge
  using Contiguous = sm80::DecodeMmaTraits<Element, kHeadDim, 3, false, 1, sm80::kScheduleStrided, 16, false, false,
                                           kLightCount, kWarps>;
  using Paged = sm80::DecodeMmaTraits<Element, kHeadDim, 3, true, 1, sm80::kScheduleContiguous, 16, false, false,
                                      kLightCount, kWarps>;
  ClusterDecode mode = cluster_decode_mode();
#if defined(FLASHCORE_DECODE_AB_VARIANTS)
  // A/B variants of the CTA, every call on the cluster kernel (docs/kvcache.md): "cluster4w" (v9)
  // sm80's CTA, 4 warps at 3 stages (100 KB, 2 a SM); "cluster6w" (v10) 6 warps at 2 stages (100 KB,
  // 2 a SM: batch 1's 8 clusters of 16 resident); "cluster12w" (v10) 12 warps at 2 stages (196 KB,
  // 1 a SM: the warps and bytes in flight of sm80's paged default).
  if (const char* ab = std::getenv("FLASHCORE_DECODE_AB"); ab != nullptr) {
    const bool paged = params.block_table != nullptr;
    const auto run = [&](auto traits) { return launch_cluster_decode<decltype(traits)>(params, stream, ClusterDecode::kOn); };
    if (std::strcmp(ab, "cluster4w") == 0) {
      return paged ? run(DecodeTraitsAB<Element, kHeadDim, true, 4, 3>{}) : run(DecodeTraitsAB<Element, kHeadDim, false, 4, 3>{});
    }
    if (std::strcmp(ab, "cluster6w") == 0) {
      return paged ? run(DecodeTraitsAB<Element, kHeadDim, true, 6, 2>{}) : run(DecodeTraitsAB<Element, kHeadDim, false, 6, 2>{});
    }
    if (std::strcmp(ab, "cluster12w") == 0) {
      return paged ? run(DecodeTraitsAB<Element, kHeadDim, true, 12, 2>{}) : run(DecodeTraitsAB<Element, kHeadDim, false, 12, 2>{});
    }
  }
#endif
  if (params.block_table != nullptr) return launch_cluster_decode<Paged>(params, stream, mode);
  return launch_cluster_decode<Contiguous>(params, stream, mode);
}

}  // namespace flashcore::cuda::sm90
