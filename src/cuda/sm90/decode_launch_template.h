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
//
// Without a fallback (kernels=sm90, or a build with no sm80 decode row) every problem runs here, and
// a cluster the GPU cannot hold (16 CTAs of one SM each need a GPC of 16 SMs: not on every Hopper
// part or MIG slice) runs as clusters of half as many splits, down to one; if even that cannot be
// resident the call fails with NotSupported. Both are decided before the append writes the cache.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda/common/cuda_check.h"
#include "cuda/common/decode_grid.h"
#include "cuda/params.h"
#include "cuda/sm80/decode_mma_kernel.h"
#include "cuda/sm90/cluster_launch.h"
#include "cuda/sm90/decode_cluster_kernel.h"
#include "cuda/sm90/decode_launch.h"

namespace flashcore::cuda::sm90 {

enum class ClusterDecode { kAuto, kOn, kOff };

// FLASHCORE_DECODE_CLUSTER, read once: "on" / "off" / anything else = auto.
inline ClusterDecode cluster_decode_mode() {
  static const ClusterDecode mode = [] {
    const char* env = std::getenv("FLASHCORE_DECODE_CLUSTER");
    if (env != nullptr && std::strcmp(env, "on") == 0) return ClusterDecode::kOn;
    if (env != nullptr && std::strcmp(env, "off") == 0) return ClusterDecode::kOff;
    return ClusterDecode::kAuto;
  }();
  return mode;
}

// What the driver says of decode_cluster_kernel<Traits> on one device, asked once (the statics
// belong to this instantiation: one kernel, one CTA shape): the opt-ins (dynamic shared memory above
// 48 KB, the non-portable cluster size 16), set through common/decode_grid.h's DecodeKernelOnDevice,
// and how many clusters of each size the device holds at once.
template <class Traits>
class ClusterDecodeDevice {
 public:
  static constexpr int kTrackedDevices = DecodeKernelOnDevice<Traits>::kTrackedDevices;

  static auto kernel() { return &decode_cluster_kernel<Traits>; }

  static Status prepare(int device) {
    return DecodeKernelOnDevice<Traits>::set_up(kernel(), device, [] {
      FLASHCORE_CUDA_RETURN_IF_ERROR(
          cudaFuncSetAttribute(kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes));
      FLASHCORE_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel(), cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      return Status::Ok();
    });
  }

  // Clusters of `size` CTAs (1 to kMaxClusterSplits) resident at once on `device` (after prepare).
  static Status resident_clusters(int device, int size, int* clusters) {
    const bool tracked = device >= 0 && device < kTrackedDevices;
    if (tracked) {
      if (const int known = resident_[device][size].load(std::memory_order_relaxed); known > 0) {
        *clusters = known - 1;
        return Status::Ok();
      }
    }
    cudaLaunchAttribute cluster = cluster_dimension(static_cast<unsigned>(size), 1);
    const cudaLaunchConfig_t config = cluster_launch_config(dim3(size), Traits::kThreads, Traits::kSmemBytes, nullptr, &cluster);
    FLASHCORE_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveClusters(clusters, kernel(), &config));
    if (tracked) resident_[device][size].store(*clusters + 1, std::memory_order_relaxed);
    return Status::Ok();
  }

 private:
  static inline std::atomic<int> resident_[kTrackedDevices][kMaxClusterSplits + 1] = {};  // value + 1; 0: not asked
};

template <class Traits>
Status launch_cluster_decode(const DecodeParams& params, cudaStream_t stream, ClusterDecode mode) {
  using Element = typename Traits::Element;
  using Device = ClusterDecodeDevice<Traits>;
  constexpr int kSmem = Traits::kSmemBytes;
  const bool has_fallback = params.fallback != nullptr;
  if (mode == ClusterDecode::kOff) {
    if (has_fallback) return params.fallback(params, stream);
    return Status::NotSupported(
        "flashcore::forward_kvcache: kernels: FLASHCORE_DECODE_CLUSTER=off keeps problems off the sm90 cluster decode "
        "kernel, and this call has no sm80 decode kernel to run instead (kernels=sm90, or a build without one)");
  }
  const bool auto_mode = mode == ClusterDecode::kAuto && has_fallback;
  // Paged caches stay on sm80 (batch 8 page 16 on the cluster kernel: v9 100.9 us against 99.3, v10's
  // 12-warp CTA 99.1 against 98.9; batch 1 page 16, 9 splits of 12 warps, 21.1 against 20.4).
  if (auto_mode && (params.head_dim <= Traits::kHeadDim / 2 || params.num_splits > kMaxClusterSplits ||
                    params.block_table != nullptr)) {
    return params.fallback(params, stream);
  }
  const int device = params.device.ordinal;
  FLASHCORE_RETURN_IF_ERROR(Device::prepare(device));

  DecodeGrid grid;
  FLASHCORE_RETURN_IF_ERROR(decode_grid<Traits>(params, Device::kernel(), kMaxClusterSplits, &grid));
  int num_splits = grid.num_splits;
  if (auto_mode && num_splits == 1) return params.fallback(params, stream);  // no merge to save
  if (auto_mode) {
    // One wave of clusters or none: the heuristic counted SM slots, but a cluster needs its CTAs in
    // one GPC, so fewer clusters fit than slots / size (v9: the H100 holds 7 clusters of 16, 15 of
    // 8, 22 of 5 at one CTA a SM). Batch 1 (8 clusters of 16) took two waves: 33.1 us against
    // sm80's 20.4. Only single-wave grids were measured faster (batch 8: 64 clusters of 2, 66 fit).
    int clusters = 0;
    FLASHCORE_RETURN_IF_ERROR(Device::resident_clusters(device, num_splits, &clusters));
    if (grid.base_ctas > clusters) return params.fallback(params, stream);
  } else {
    // The kernel runs whatever the split count; a cluster that cannot be placed at all would fail at
    // launch, after the append had written the cache, so take smaller clusters (any count is right).
    Status query = Status::Ok();
    num_splits = cluster_splits_that_fit(num_splits, [&](int size) {
      int clusters = 0;
      query = Device::resident_clusters(device, size, &clusters);
      return query.ok() ? clusters : -1;
    });
    FLASHCORE_RETURN_IF_ERROR(query);
    if (num_splits == 0) {
      return Status::NotSupported("flashcore::forward_kvcache: kernels: this GPU cannot hold one CTA of the sm90 "
                                  "cluster decode kernel (" + std::to_string(kSmem) +
                                  " bytes of shared memory); use kernels=auto or kernels=sm80");
    }
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
  return cuda_status(cudaLaunchKernelEx(&config, Device::kernel(), p),
                     "flashcore::forward_kvcache: launching the cluster decode kernel");
}

// Contiguous caches: strided splits (sm80's choice since v8); paged: contiguous runs of tiles with
// the page offsets found one lane a key (v6, v8). 3 stages, 8 warps: 200 KB at d128, one CTA a SM.
template <typename Element, int kHeadDim>
Status run_decode(const DecodeParams& params, cudaStream_t stream) {
  constexpr int kWarps = 8;
  using Contiguous = ClusterDecodeTraits<
      sm80::DecodeMmaTraits<Element, kHeadDim, 3, false, 1, sm80::kScheduleStrided, 16, false, false, false, kWarps>>;
  using Paged = ClusterDecodeTraits<
      sm80::DecodeMmaTraits<Element, kHeadDim, 3, true, 1, sm80::kScheduleContiguous, 16, false, false, false, kWarps>>;
  const ClusterDecode mode = cluster_decode_mode();
  if (params.block_table != nullptr) return launch_cluster_decode<Paged>(params, stream, mode);
  return launch_cluster_decode<Contiguous>(params, stream, mode);
}

}  // namespace flashcore::cuda::sm90
