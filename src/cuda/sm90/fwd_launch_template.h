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
#include <type_traits>

#include <cute/tensor.hpp>

#include "cuda/common/cuda_check.h"
#include "cuda/sm90/cluster_launch.h"
#include "cuda/sm90/fwd_kernel.h"
#include "cuda/sm90/fwd_launch.h"
#include "cuda/sm90/fwd_score_options.h"
#include "cuda/sm90/fwd_tile_size.h"
#include "cuda/sm90/fwd_traits.h"
#include "cuda/sm90/tile_scheduler.h"

namespace flashcore::cuda::sm90 {

// The TMA descriptors of a call (Q, K, V^T). Each is a pure function of its base pointer, shape and
// strides.
template <class Traits>
struct FwdTmaDescriptors {
  typename Traits::TmaQ q;
  typename Traits::TmaK k;
  typename Traits::TmaV v;
};

// The 8- and 16-byte O stores can write O: a 16-byte aligned base, batch/row/head strides in
// 16-byte units, whole 16-byte rows. Calls through the API always are (staging.h restages the
// others); the dev harness and future callers need not be.
inline bool fwd_o_16b_aligned(const FwdParams& p) {
  constexpr int kElemsPer16B = 8;  // 16-bit elements
  return reinterpret_cast<std::uintptr_t>(p.out) % 16 == 0 && p.head_dim % kElemsPer16B == 0 &&
         p.o_strides.row % kElemsPer16B == 0 && p.o_strides.head % kElemsPer16B == 0 &&
         p.o_strides.batch % kElemsPer16B == 0;
}

// The (rows, batches) of the tensors as TMA reads them: dense (seqlen, batch); varlen one batch
// of the packed total rows (fwd_sequence.h places each sequence in it).
struct FwdTmaExtent {
  int rows_q, rows_k, batches;
  static FwdTmaExtent of(const FwdParams& p) {
    return p.cu_seqlens_q != nullptr ? FwdTmaExtent{p.total_q, p.total_k, 1}
                                     : FwdTmaExtent{p.seqlen_q, p.seqlen_k, p.batch};
  }
};

template <class Traits>
FwdTmaDescriptors<Traits> make_fwd_tma_descriptors(const FwdParams& p) {
  using namespace cute;
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN, kHeadDim = Traits::kHeadDim;
  // The descriptors carry the real head_dim: TMA zero-fills columns past it, as it does rows
  // past seqlen (varlen: past the packed tensors' last row).
  const FwdTmaExtent e = FwdTmaExtent::of(p);
  auto shape_q = make_shape(e.rows_q, p.head_dim, p.heads_q, e.batches);
  auto shape_k = make_shape(e.rows_k, p.head_dim, p.heads_kv, e.batches);
  auto shape_vt = make_shape(p.head_dim, e.rows_k, p.heads_kv, e.batches);
  Tensor mQ = make_tensor(make_gmem_ptr(static_cast<Element const*>(p.q)), shape_q,
                          make_stride(p.q_strides.row, _1{}, p.q_strides.head, p.q_strides.batch));
  Tensor mK = make_tensor(make_gmem_ptr(static_cast<Element const*>(p.k)), shape_k,
                          make_stride(p.k_strides.row, _1{}, p.k_strides.head, p.k_strides.batch));
  Tensor mVt = make_tensor(make_gmem_ptr(static_cast<Element const*>(p.v)), shape_vt,
                           make_stride(_1{}, p.v_strides.row, p.v_strides.head, p.v_strides.batch));
  typename Traits::SmemLayoutK smem_k;
  typename Traits::SmemLayoutVt smem_vt;
  using TmaLoadKV = typename Traits::TmaLoadKV;
  constexpr auto cluster_m = Int<Traits::kClusterM>{};
  return {
      make_tma_copy(SM90_TMA_LOAD{}, mQ, typename Traits::SmemLayoutQ{}, Shape<Int<kBlockM>, Int<kHeadDim>>{}, _1{}),
      make_tma_copy(TmaLoadKV{}, mK, take<0, 2>(smem_k), Shape<Int<kBlockN>, Int<kHeadDim>>{}, cluster_m),
      make_tma_copy(TmaLoadKV{}, mVt, take<0, 2>(smem_vt), Shape<Int<kHeadDim>, Int<kBlockN>>{}, cluster_m),
  };
}

// The descriptors of this host thread's last few calls per kernel. Encoding one is a driver call
// (cuTensorMapEncodeTiled) and the three were most of a small call's host time; a call with the
// same pointers, sizes and strides as a recent one reuses them. The key holds everything a
// descriptor is computed from, so a hit is bit for bit what encoding again would give, whatever
// happened to the memory in between; per thread, so no lock.
template <class Traits>
class FwdTmaDescriptorCache {
 public:
  static FwdTmaDescriptors<Traits> const& get(const FwdParams& p) {
    thread_local FwdTmaDescriptorCache cache;
    const Key key = Key::of(p);
    for (int i = 0; i < cache.used_; ++i) {
      if (cache.entries_[i].key == key) return cache.entries_[i].descriptors;
    }
    Entry& e = cache.entries_[cache.next_];
    e.key = key;
    e.descriptors = make_fwd_tma_descriptors<Traits>(p);
    cache.next_ = (cache.next_ + 1) % kEntries;
    if (cache.used_ < kEntries) ++cache.used_;
    return e.descriptors;
  }

 private:
  struct Key {
    const void* q;
    const void* k;
    const void* v;
    int device, batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;  // the TMA extents (FwdTmaExtent)
    TensorStrides q_strides, k_strides, v_strides;

    static Key of(const FwdParams& p) {
      const FwdTmaExtent e = FwdTmaExtent::of(p);
      return {p.q,         p.k,         p.v,         p.device.ordinal, e.batches, p.heads_q, p.heads_kv, e.rows_q,
              e.rows_k,    p.head_dim,  p.q_strides, p.k_strides,      p.v_strides};
    }
    static bool same(const TensorStrides& a, const TensorStrides& b) {
      return a.batch == b.batch && a.row == b.row && a.head == b.head;
    }
    bool operator==(const Key& o) const {
      return q == o.q && k == o.k && v == o.v && device == o.device && batch == o.batch && heads_q == o.heads_q &&
             heads_kv == o.heads_kv && seqlen_q == o.seqlen_q && seqlen_k == o.seqlen_k && head_dim == o.head_dim &&
             same(q_strides, o.q_strides) && same(k_strides, o.k_strides) && same(v_strides, o.v_strides);
    }
  };
  struct Entry {
    Key key;
    FwdTmaDescriptors<Traits> descriptors;
  };
  static constexpr int kEntries = 4;
  Entry entries_[kEntries];
  int used_ = 0;
  int next_ = 0;
};

template <class Traits>
typename Traits::Params make_fwd_kernel_params(const FwdParams& p) {
  using namespace cute;
  constexpr int kBlockM = Traits::kBlockM;
  FwdTmaDescriptors<Traits> const& tma = FwdTmaDescriptorCache<Traits>::get(p);
  const FwdTmaExtent e = FwdTmaExtent::of(p);
  const bool varlen = p.cu_seqlens_q != nullptr;
  return {
      tma.q,
      tma.k,
      tma.v,
      make_shape(e.rows_q, p.head_dim, p.heads_q, e.batches),
      make_shape(e.rows_k, p.head_dim, p.heads_kv, e.batches),
      make_shape(p.head_dim, e.rows_k, p.heads_kv, e.batches),
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
      // Dropout's stream counts rows in 16-row groups from the first query, and a warp's slab must
      // start on one (common/dropout.h): with dropout the offset is rounded down to a multiple of 16.
      // Varlen: per sequence (fwd_sequence.h), with the same mask.
      Traits::kIsCausal && !varlen
          ? ((p.seqlen_q + kBlockM - 1) / kBlockM * kBlockM - p.seqlen_q) & (p.has_dropout ? ~15 : ~0)
          : 0,
      p.has_dropout ? ~15 : ~0,
      p.softmax_scale,
      p.scale_log2,
      varlen ? p.cu_seqlens_q : nullptr,
      varlen ? p.cu_seqlens_k : nullptr,
      p.total_q,
      p.total_k,
  };
}

// How many clusters of kClusterM CTAs of `kernel` the device holds at once (the persistent grid
// of a clustered kernel); the CTAs of a cluster must fit on one GPC, so this can be less than
// #SMs / kClusterM.
template <int kClusterM, class Kernel>
int max_active_clusters(Kernel kernel, int threads, int smem_bytes, int sm_count) {
  cudaLaunchAttribute cluster = cluster_dimension(kClusterM, 1);
  cudaLaunchConfig_t config = cluster_launch_config(dim3(unsigned(sm_count / kClusterM * kClusterM)), unsigned(threads),
                                                    size_t(smem_bytes), nullptr, &cluster);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess || clusters <= 0) {
    (void)cudaGetLastError();  // clear it: a fallback, not a failure of this call
    clusters = sm_count / kClusterM;
  }
  return clusters;
}

// Non-causal tiles all cost the same: persistent CTAs with a static stride (clusters of
// neighbouring m_blocks where the tile asks for them). Causal tiles do not: one tile per CTA by
// default, longest first (tile_scheduler.h).
template <class Traits, bool kPersistent = !Traits::kIsCausal,
          class Scheduler = std::conditional_t<(Traits::kClusterM > 1), FwdClusterScheduler<Traits::kClusterM>,
                                               FwdTileScheduler<kPersistent, Traits::kIsCausal>>,
          FwdVariant kVariant = FwdVariant::kPlain>
Status launch_fwd(const FwdParams& p, cudaStream_t stream) {
  constexpr int kClusterM = Traits::kClusterM;
  auto kernel = &fwd_kernel<Traits, Scheduler, kVariant>;
  constexpr int kSmemBytes = Traits::kSmemBytes;
  // The smem opt-in is per device and kernel; set it once per device rather than on every call
  // (a driver round trip that shows in small-shape latency). The flag records which kernel it
  // was set for: this static belongs to one template instantiation, and the dynamic linker
  // unifies such statics across shared libraries (STB_GNU_UNIQUE), so a second library holding
  // the same instantiation (a second copy of flashcore in the process) shares the flag but not
  // the kernel; it then sets its own once more instead of launching without the opt-in.
  constexpr int kTrackedDevices = 64;  // devices past these set the attribute on every call
  // A clustered kernel's persistent grid is sized by how many of its clusters fit at once, asked
  // of the driver after the opt-in and kept with it.
  static std::atomic<const void*> smem_configured[kTrackedDevices] = {};
  static std::atomic<int> cluster_capacity[kTrackedDevices] = {};
  const int device = p.device.ordinal;
  const bool tracked = device >= 0 && device < kTrackedDevices;
  const void* const kernel_id = reinterpret_cast<const void*>(kernel);
  int capacity = p.device.sm_count;
  if (!tracked || smem_configured[device].load(std::memory_order_acquire) != kernel_id) {
    FLASHCORE_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    if constexpr (kClusterM > 1) {
      capacity = max_active_clusters<kClusterM>(kernel, Traits::kThreads, kSmemBytes, p.device.sm_count);
      if (tracked) cluster_capacity[device].store(capacity, std::memory_order_relaxed);
    }
    if (tracked) smem_configured[device].store(kernel_id, std::memory_order_release);
  } else if constexpr (kClusterM > 1) {
    capacity = cluster_capacity[device].load(std::memory_order_relaxed);
  }

  if constexpr (Traits::kOStoreBytes > 4) {
    if (!fwd_o_16b_aligned(p)) {
      return Status::Internal("flashcore::forward: out: the sm90 kernel stores 8- or 16-byte groups and needs O's "
                              "rows 16-byte aligned and head_dim a multiple of 8 (staging.h should have arranged it)");
    }
  }
  const typename Traits::Params params = make_fwd_kernel_params<Traits>(p);
  Scheduler scheduler{params.num_m_blocks, p.heads_q, p.batch};
  if (p.cu_seqlens_q != nullptr) {
    if constexpr (Scheduler::kServesVarlen) {
      scheduler.varlen = FwdVarlenSlots::make(p.cu_seqlens_q, p.batch, p.seqlen_q, p.total_q, p.heads_q,
                                              Traits::kBlockM, Scheduler::kSlotMBlocks * Traits::kBlockM);
    } else {
      return Status::Internal("flashcore::forward: an sm90 forward scheduler without varlen got a varlen call");
    }
  }
  int grid = Scheduler::grid_size(scheduler.num_tiles(), capacity);
  if constexpr (Scheduler::kServesVarlen) grid = scheduler.grid(capacity);
  const auto option_args = FwdOptionArgs<kVariant>::of(p);
  if constexpr (kClusterM > 1) {
    cudaLaunchAttribute cluster = cluster_dimension(kClusterM, 1);
    cudaLaunchConfig_t config =
        cluster_launch_config(dim3(unsigned(grid)), unsigned(Traits::kThreads), size_t(kSmemBytes), stream, &cluster);
    return cuda_status(cudaLaunchKernelEx(&config, kernel, params, scheduler, option_args),
                       "flashcore::forward: launching the sm90 forward kernel (cluster)");
  } else {
    kernel<<<grid, Traits::kThreads, kSmemBytes, stream>>>(params, scheduler, option_args);
    return cuda_status(cudaGetLastError(), "flashcore::forward: launching the sm90 forward kernel");
  }
}

template <typename Element, int kHeadDim, bool kIsCausal, FwdTileKind kKind = FwdTileKind::kMain>
using FwdTraitsFor =
    FwdTraits<Element, kHeadDim, fwd_tile_size(kKind, kHeadDim, kIsCausal).block_m,
              fwd_tile_size(kKind, kHeadDim, kIsCausal).block_n, fwd_tile_size(kKind, kHeadDim, kIsCausal).stages,
              kIsCausal, fwd_tile_size(kKind, kHeadDim, kIsCausal).ping_pong,
              fwd_tile_size(kKind, kHeadDim, kIsCausal).q_stages,
              fwd_tile_size(kKind, kHeadDim, kIsCausal).exp2_fma_every,
              fwd_tile_size(kKind, kHeadDim, kIsCausal).cluster_m,
              fwd_tile_size(kKind, kHeadDim, kIsCausal).prefetch_next_q,
              fwd_tile_size(kKind, kHeadDim, kIsCausal).o_store_bytes>;

// The tile for one problem: the table's (fwd_tile_size.h), or for a problem whose 64-row tiles
// all fit in one wave, the small-problem tile; for few keys, the short-keys tile. The option
// kernels (fwd_score_options.h) take their own tables' tiles (fwd_tile_size_window for kWindow,
// fwd_tile_size_options for the score-option ones) and the main scheduling only. Causal with a left
// window bound: the tiles cost about the same (the window's blocks), so the persistent zig-zag grid
// at any length. Non-causal: persistent, but the general score-option kernel (kScoreMod: every
// option's code) one tile per CTA, since persistent it spilled 176 B at d128 (ptxas). The
// one-option kernels (kAlibi, kSoftcap) are instantiated for the zig-zag and the non-causal grids
// only: a causal call on the one-tile grid runs kScoreMod, which serves them too. So a (dtype, head
// dim) adds six option kernels, ten at d128.
template <typename Element, int kHeadDim, bool kIsCausal, FwdVariant kVariant = FwdVariant::kPlain>
Status run_fwd_for_shape(const FwdParams& params, cudaStream_t stream) {
  constexpr bool kPlain = kVariant == FwdVariant::kPlain;
  constexpr int kSmallBlockM = kPlain ? fwd_tile_size(FwdTileKind::kSmallProblem, kHeadDim, kIsCausal).block_m : 0;
  if constexpr (kSmallBlockM > 0) {
    const long tiles = long(params.batch) * params.heads_q * ((params.seqlen_q + kSmallBlockM - 1) / kSmallBlockM);
    if (tiles <= params.device.sm_count) {
      return launch_fwd<FwdTraitsFor<Element, kHeadDim, kIsCausal, FwdTileKind::kSmallProblem>>(params, stream);
    }
  }
  if constexpr (kPlain && fwd_tile_size(FwdTileKind::kShortKeys, kHeadDim, kIsCausal).block_m > 0) {
    if (params.seqlen_k <= kShortKeysMax) {
      return launch_fwd<FwdTraitsFor<Element, kHeadDim, kIsCausal, FwdTileKind::kShortKeys>>(params, stream);
    }
  }
  constexpr FwdTileKind kKind = kPlain                             ? FwdTileKind::kMain
                                : kVariant == FwdVariant::kWindow ? FwdTileKind::kWindow
                                                                  : FwdTileKind::kOptions;
  using Traits = FwdTraitsFor<Element, kHeadDim, kIsCausal, kKind>;
  if constexpr (kIsCausal) {
    constexpr int kZigZagMaxMBlocks = fwd_tile_size(kKind, kHeadDim, true).zigzag_max_m_blocks;
    if constexpr (kZigZagMaxMBlocks > 0) {
      const int num_m_blocks = (params.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM;
      // Varlen: one zig-zag pair of a sequence's m_blocks per CTA at any length (tile_scheduler.h).
      const bool varlen = params.cu_seqlens_q != nullptr;
      if (varlen || num_m_blocks <= kZigZagMaxMBlocks || (!kPlain && params.window_left >= 0)) {
        return launch_fwd<Traits, true, FwdZigZagScheduler, kVariant>(params, stream);
      }
    }
  }
  // The discarded branch instantiates nothing: no causal one-tile kernel of a one-option variant.
  if constexpr (kIsCausal && (kVariant == FwdVariant::kAlibi || kVariant == FwdVariant::kSoftcap)) {
    return run_fwd_for_shape<Element, kHeadDim, true, FwdVariant::kScoreMod>(params, stream);
  } else {
    constexpr bool kPersistent = !kIsCausal && kVariant != FwdVariant::kScoreMod;
    return launch_fwd<Traits, kPersistent, FwdTileScheduler<kPersistent, kIsCausal>, kVariant>(params, stream);
  }
}

template <typename Element, int kHeadDim>
Status run_fwd(const FwdParams& params, cudaStream_t stream) {
  return params.causal ? run_fwd_for_shape<Element, kHeadDim, true>(params, stream)
                       : run_fwd_for_shape<Element, kHeadDim, false>(params, stream);
}

template <typename Element, int kHeadDim, FwdVariant kVariant>
Status run_fwd_variant(const FwdParams& params, cudaStream_t stream) {
  return params.causal ? run_fwd_for_shape<Element, kHeadDim, true, kVariant>(params, stream)
                       : run_fwd_for_shape<Element, kHeadDim, false, kVariant>(params, stream);
}

// The option kernels: sliding window, softcap, ALiBi and dropout (any of them, or none) as runtime
// data, registered in the dispatch table beside run_fwd with the options bits (generate.py's
// "variants"). The leanest kernel that serves the call: without softcap and ALiBi the window
// kernel (no score code: the softcap/ALiBi kernel measured ~9 % slower on window-only calls, 3-4 %
// on dropout-only ones at 8k, docs/dropout.md v4); at d128 with one of them its one-option kernel
// (kSoftcap in bf16 only up to kBoundedSoftcapMax, where its softmax may fix the row max); else
// the general score-option kernel.
template <typename Element, int kHeadDim>
Status run_fwd_options(const FwdParams& params, cudaStream_t stream) {
  const bool softcap = params.softcap > 0.0f, alibi = params.alibi_slopes != nullptr;
  if (!softcap && !alibi) return run_fwd_variant<Element, kHeadDim, FwdVariant::kWindow>(params, stream);
  if constexpr (kHeadDim > 96 && kHeadDim <= 128) {
    constexpr bool kBf16 = std::is_same_v<Element, cutlass::bfloat16_t>;
    if (!softcap) return run_fwd_variant<Element, kHeadDim, FwdVariant::kAlibi>(params, stream);
    if (!alibi && (!kBf16 || params.softcap <= kBoundedSoftcapMax)) {
      return run_fwd_variant<Element, kHeadDim, FwdVariant::kSoftcap>(params, stream);
    }
  }
  return run_fwd_variant<Element, kHeadDim, FwdVariant::kScoreMod>(params, stream);
}

}  // namespace flashcore::cuda::sm90
