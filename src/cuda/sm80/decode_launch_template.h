// Launch of forward_kvcache's kernels for one (dtype, head dim): the append (when there are new
// tokens), the split-KV decode kernel, and the combine (when split). The split count comes from
// the caller or from common/decode_splits.h's heuristic with this kernel's measured occupancy; the
// split workspace from the per-stream cache of cuda/decode_workspace.h.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "cuda/common/cuda_check.h"
#include "cuda/common/decode_grid.h"
#include "cuda/decode_workspace.h"
#include "cuda/sm80/decode_append.h"
#include "cuda/sm80/decode_combine.h"
#include "cuda/sm80/decode_kernel.h"
#include "cuda/sm80/decode_launch.h"
#include "cuda/sm80/decode_mma_kernel.h"
#include "cuda/sm80/decode_traits.h"

namespace flashcore::cuda::sm80 {

// Which decode kernel runs: the tensor-core one (decode_mma_kernel.h, the default) or the FP32-FMA
// one (decode_kernel.h) when the environment variable FLASHCORE_DECODE_KERNEL is "fma", so both can
// be tested and timed on one build.
inline bool use_fma_decode_kernel() {
  static const bool fma = [] {
    const char* env = std::getenv("FLASHCORE_DECODE_KERNEL");
    return env != nullptr && std::strcmp(env, "fma") == 0;
  }();
  return fma;
}

// Pipeline depth of the tensor-core kernel. Measured on the H100 (docs/kvcache.md, v2): three
// stages (100 KB, 2 CTAs a SM) read a contiguous cache 3-4% faster than two (68 KB, 3 CTAs a SM),
// but a paged one 14-16% slower (the block-table reads before each tile's loads are hidden by more
// resident warps, not by deeper pipelines; v4 measured a one-tile-ahead read of the page ids and
// found it slower still). v6 measured the deepest pipeline at one CTA a SM (d128: 6 stages, half
// the splits) slower at every batch, contiguous and paged (+26% at batch 1): one warp a SM
// sub-partition leaves each tile's math latency exposed. FLASHCORE_DECODE_STAGES=2 or 3 forces
// one, for A/B runs.
inline int decode_stages(bool paged) {
  static const int forced = [] {
    const char* env = std::getenv("FLASHCORE_DECODE_STAGES");
    return env == nullptr ? 0 : std::atoi(env);
  }();
  return forced == 2 || forced == 3 ? forced : (paged ? 2 : 3);
}

// How a paged tile finds its keys' cache offsets: one lane a key, shared by shuffles (the default,
// v6), or every lane for each chunk it copies when FLASHCORE_DECODE_PAGE_IDS is "per-chunk" (the
// v1-v5 path, for A/B runs).
inline bool page_ids_by_lane() {
  static const bool on = [] {
    const char* env = std::getenv("FLASHCORE_DECODE_PAGE_IDS");
    return env == nullptr || std::strcmp(env, "per-chunk") != 0;
  }();
  return on;
}

// How the splits merge: in the decode kernel, by the split CTA that finishes last (the default), or
// by the separate combine kernel when FLASHCORE_DECODE_COMBINE is "kernel" (A/B runs; v5 in
// docs/kvcache.md).
inline bool use_combine_kernel() {
  static const bool on = [] {
    const char* env = std::getenv("FLASHCORE_DECODE_COMBINE");
    return env != nullptr && std::strcmp(env, "kernel") == 0;
  }();
  return on;
}

#if defined(FLASHCORE_DECODE_AB_VARIANTS)
inline std::string decode_ab_variant() {  // FLASHCORE_DECODE_AB (run_decode_ab below)
  const char* env = std::getenv("FLASHCORE_DECODE_AB");
  return env == nullptr ? std::string() : std::string(env);
}
#endif

// Traits::kPdlMerge where the traits have it (the tensor-core kernel's; the FMA kernel's do not).
template <class Traits, class = void>
struct pdl_merge : std::false_type {};
template <class Traits>
struct pdl_merge<Traits, std::void_t<decltype(Traits::kPdlMerge)>> : std::bool_constant<Traits::kPdlMerge> {};

template <class Traits, class Kernel>
Status launch_decode(const DecodeParams& params, cudaStream_t stream, Kernel kernel) {
  using Element = typename Traits::Element;
  constexpr int kSmem = Traits::kSmemBytes;
  constexpr bool kPdlMerge = pdl_merge<Traits>::value;
  if constexpr (kSmem > 48 * 1024) {
    FLASHCORE_RETURN_IF_ERROR(DecodeKernelOnDevice<Traits>::set_up(kernel, params.device.ordinal, [&] {
      FLASHCORE_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
      return Status::Ok();
    }));
  }
  // kMaxSplits: the combine kernel holds one weight per split.
  DecodeGrid grid;
  FLASHCORE_RETURN_IF_ERROR(decode_grid<Traits>(params, kernel, kMaxSplits, &grid));
  const int num_splits = grid.num_splits;
  const int m_blocks = grid.m_blocks;
  const long long base_ctas = grid.base_ctas;

  DecodeParams p = params;
  p.num_splits = num_splits;
  DecodeWorkspace workspace;
  const bool fused_combine = !use_combine_kernel();
  if (num_splits > 1) {
    // (num_splits, rows) partial outputs and LSEs; (fused merge) one counter a CTA column.
    const std::int64_t partial_rows = static_cast<std::int64_t>(num_splits) * p.batch * p.heads_q * p.seqlen_q;
    const size_t partial_bytes = static_cast<size_t>(partial_rows) * (p.head_dim + 1) * sizeof(float);
    const size_t counters_bytes = fused_combine ? static_cast<size_t>(base_ctas) * sizeof(unsigned) : 0;
    FLASHCORE_RETURN_IF_ERROR(
        acquire_decode_workspace(p.device.ordinal, stream, partial_bytes, counters_bytes, &workspace));
    p.o_accum = static_cast<float*>(workspace.partials);
    p.lse_accum = p.o_accum + partial_rows * p.head_dim;
    if (fused_combine && !kPdlMerge) p.split_counters = static_cast<unsigned*>(workspace.counters);
#if defined(FLASHCORE_DECODE_AB_VARIANTS)
    if (fused_combine && decode_ab_variant() == "no_merge") p.split_counters = nullptr;  // diagnostic: partials only
#endif
  }
  Status status = Status::Ok();
  if (p.seqlen_new > 0) {
    decode_append_kernel<Element><<<dim3(p.seqlen_new, p.heads_kv, p.batch), 64, 0, stream>>>(p);
    status = cuda_status(cudaGetLastError(), "flashcore::forward_kvcache: launching the append kernel");
  }
  if (status.ok()) {
    kernel<<<dim3(num_splits, p.heads_kv * m_blocks, p.batch), Traits::kThreads, kSmem, stream>>>(p);
    status = cuda_status(cudaGetLastError(), "flashcore::forward_kvcache: launching the decode kernel");
  }
#if defined(FLASHCORE_DECODE_AB_VARIANTS)
  if constexpr (kPdlMerge) {
    if (status.ok() && num_splits > 1) {
      // Programmatic dependent launch (sm90+): the merge kernel may start before the decode grid
      // ends; its griddepcontrol.wait holds it until the partials are visible.
      cudaLaunchConfig_t config = {};
      config.gridDim = dim3(1, p.heads_kv * m_blocks, p.batch);
      config.blockDim = dim3(Traits::kThreads);
      config.dynamicSmemBytes = 0;
      config.stream = stream;
      cudaLaunchAttribute attribute[1];
      attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attribute[0].val.programmaticStreamSerializationAllowed = p.device.compute_capability >= 90 ? 1 : 0;
      config.attrs = attribute;
      config.numAttrs = 1;
      status = cuda_status(
          cudaLaunchKernelEx(&config, decode_merge_kernel<Element, Traits::kRows, Traits::kThreads>, p, num_splits),
          "flashcore::forward_kvcache: launching the split merge kernel");
    }
  }
#endif
  if (status.ok() && num_splits > 1 && !fused_combine) {
    const std::int64_t query_rows = static_cast<std::int64_t>(p.batch) * p.heads_q * p.seqlen_q;
    decode_combine_kernel<Element><<<static_cast<unsigned>(query_rows), kCombineThreads, 0, stream>>>(p, num_splits);
    status = cuda_status(cudaGetLastError(), "flashcore::forward_kvcache: launching the split combine kernel");
  }
  const Status released = release_decode_workspace(workspace, stream);
  if (status.ok()) status = released;
  return status;
}

#if defined(FLASHCORE_DECODE_AB_VARIANTS)
// Device A/B runs only (CMake FLASHCORE_DECODE_AB_VARIANTS): FLASHCORE_DECODE_AB, read at every call
// so one process can time them all, picks v7's experiments in place of the default kernel (bf16,
// head dim 128): "chains2", "strided", "early", "merge32" (contiguous caches), "pdl_merge" (the
// merge as a kernel behind a programmatic dependent launch) (these five on v7's contiguous
// schedule and fenced count); v8's "contiguous" (the contiguous schedule with the light count:
// the paged default), "fence_all" (strided, v7's fenced count), "v7" (v7's defaults); or a diagnostic with
// wrong results: "loads_only" (no math), "no_merge" (the splits' partials are not merged).
// docs/kvcache.md, v7.
template <typename Element, int kHeadDim>
bool run_decode_ab(const DecodeParams& params, cudaStream_t stream, Status* status) {
  if constexpr (kHeadDim == 128 && std::is_same_v<Element, cutlass::bfloat16_t>) {
    const std::string ab = decode_ab_variant();
    if (ab.empty() || ab == "no_merge") return false;
    const bool paged = params.block_table != nullptr;
    const auto run = [&](auto traits) {
      using Traits = decltype(traits);
      *status = launch_decode<Traits>(params, stream, &decode_mma_kernel<Traits>);
      return true;
    };
    // The default's stages and page offsets (run_decode below): 3 stages contiguous, 2 + lane offsets paged.
    if (ab == "chains2") {
      return paged ? run(DecodeMmaTraits<Element, kHeadDim, 2, true, 2>{}) : run(DecodeMmaTraits<Element, kHeadDim, 3, false, 2>{});
    }
    if (ab == "strided") {
      return paged ? run(DecodeMmaTraits<Element, kHeadDim, 2, true, 1, kScheduleStrided>{})
                   : run(DecodeMmaTraits<Element, kHeadDim, 3, false, 1, kScheduleStrided>{});
    }
    if (ab == "early") {
      return paged ? run(DecodeMmaTraits<Element, kHeadDim, 2, true, 1, kScheduleEarlyLoads>{})
                   : run(DecodeMmaTraits<Element, kHeadDim, 3, false, 1, kScheduleEarlyLoads>{});
    }
    if (ab == "merge32" && !paged) return run(DecodeMmaTraits<Element, kHeadDim, 3, false, 1, kScheduleContiguous, 32>{});
    if (ab == "pdl_merge") {
      return paged ? run(DecodeMmaTraits<Element, kHeadDim, 2, true, 1, kScheduleContiguous, 16, false, true>{})
                   : run(DecodeMmaTraits<Element, kHeadDim, 3, false, 1, kScheduleContiguous, 16, false, true>{});
    }
    // v8: the default's two changes one at a time and both undone ("v7": v7's default kernels).
    if (ab == "contiguous") {
      return paged ? run(DecodeMmaTraits<Element, kHeadDim, 2, true, 1, kScheduleContiguous, 16, false, false, true>{})
                   : run(DecodeMmaTraits<Element, kHeadDim, 3, false, 1, kScheduleContiguous, 16, false, false, true>{});
    }
    if (ab == "fence_all") {
      return paged ? run(DecodeMmaTraits<Element, kHeadDim, 2, true, 1, kScheduleStrided>{})
                   : run(DecodeMmaTraits<Element, kHeadDim, 3, false, 1, kScheduleStrided>{});
    }
    if (ab == "v7") {
      return paged ? run(DecodeMmaTraits<Element, kHeadDim, 2, true>{}) : run(DecodeMmaTraits<Element, kHeadDim, 3>{});
    }
    if (ab == "loads_only") {
      return paged ? run(DecodeMmaTraits<Element, kHeadDim, 2, true, 1, kScheduleContiguous, 16, true>{})
                   : run(DecodeMmaTraits<Element, kHeadDim, 3, false, 1, kScheduleContiguous, 16, true>{});
    }
  }
  return false;
}
#endif

// The tensor-core kernel packs 16 rows a CTA; the FMA kernel 4 (q, the accumulators and the scores
// in ~200 registers; 8 rows spilled), more rows running as more row blocks.
template <typename Element, int kHeadDim>
Status run_decode(const DecodeParams& params, cudaStream_t stream) {
  if (!use_fma_decode_kernel()) {
#if defined(FLASHCORE_DECODE_AB_VARIANTS)
    if (Status status = Status::Ok(); run_decode_ab<Element, kHeadDim>(params, stream, &status)) return status;
#endif
    // Contiguous caches never take the page-offset path: their kernels are built without it (v4
    // measured code a contiguous cache never runs slowing it down). Since v8 (docs/kvcache.md): the
    // light arrival count everywhere; strided splits for contiguous caches (batch 1 -0.2 us, batch 8
    // -1.4%) but not for the paged kernel (batch 1 +0.4 us, +0.2 in v7; plausibly because a
    // strided split's tiles find their page ids on a block-table line each, a contiguous split's
    // on one or two).
    const bool paged = params.block_table != nullptr;
    constexpr bool kLightCount = true;
    if (decode_stages(paged) == 3) {
      using Mma3 = DecodeMmaTraits<Element, kHeadDim, 3, false, 1, kScheduleStrided, 16, false, false, kLightCount>;
      return launch_decode<Mma3>(params, stream, &decode_mma_kernel<Mma3>);
    }
    if (paged && page_ids_by_lane()) {
      using Mma2Paged = DecodeMmaTraits<Element, kHeadDim, 2, true, 1, kScheduleContiguous, 16, false, false, kLightCount>;
      return launch_decode<Mma2Paged>(params, stream, &decode_mma_kernel<Mma2Paged>);
    }
    using Mma = DecodeMmaTraits<Element, kHeadDim, 2, false, 1, kScheduleStrided, 16, false, false, kLightCount>;
    return launch_decode<Mma>(params, stream, &decode_mma_kernel<Mma>);
  }
  using Fma = DecodeTraits<Element, kHeadDim, 4>;
  return launch_decode<Fma>(params, stream, &decode_kernel<Fma>);
}

}  // namespace flashcore::cuda::sm80
