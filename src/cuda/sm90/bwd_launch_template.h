// Launch of the sm90 backward pass for one (dtype, head dim): TMA descriptors from the caller's
// strides, the dynamic smem limit raised, then preprocess (which zeroes dq_accum) -> main ->
// convert on the stream. Included only by src/cuda/instantiations/bwd_sm90_*.cu.
#pragma once

// Before any CuTe header (bwd_traits.h says why).
#ifndef CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#endif

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>

#include <cute/tensor.hpp>

#include "cuda/common/cuda_check.h"
#include "cuda/sm80/bwd_preprocess.h"
#include "cuda/sm90/bwd_convert_dq.h"
#include "cuda/sm90/cluster_launch.h"
#include "cuda/sm90/bwd_kernel.h"
#include "cuda/sm90/bwd_launch.h"
#include "cuda/sm90/bwd_sequence.h"
#include "cuda/sm90/bwd_tile_order.h"
#include "cuda/sm90/bwd_tile_size.h"
#include "cuda/sm90/bwd_traits.h"
#include "cuda/sm90/bwd_varlen_order.h"

namespace flashcore::cuda::sm90 {

template <class Traits>
typename Traits::Params make_bwd_kernel_params(const BwdParams& p) {
  using namespace cute;
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN, kHeadDim = Traits::kHeadDim;
  // The descriptors carry the real head_dim: TMA zero-fills columns past it, as it does rows
  // past seqlen. Varlen: one batch of the packed rows (bwd_sequence.h places each sequence in it).
  const bool varlen = p.cu_seqlens_q != nullptr;
  auto shape_q = make_shape(varlen ? p.total_q : p.seqlen_q, p.head_dim, p.heads_q, varlen ? 1 : p.batch);
  auto shape_k = make_shape(varlen ? p.total_k : p.seqlen_k, p.head_dim, p.heads_kv, varlen ? 1 : p.batch);
  auto gmem = [](const void* ptr, auto shape, TensorStrides s) {
    return make_tensor(make_gmem_ptr(static_cast<Element const*>(ptr)), shape, make_stride(s.row, _1{}, s.head, s.batch));
  };
  auto smem_q = take<0, 2>(typename Traits::SmemLayoutQ{});
  typename Traits::SmemLayoutK smem_k;
  auto box_q = Shape<Int<kBlockM>, Int<kHeadDim>>{};
  auto box_k = Shape<Int<kBlockN>, Int<kHeadDim>>{};
  typename Traits::Params params{
      make_tma_copy(SM90_TMA_LOAD{}, gmem(p.q, shape_q, p.q_strides), smem_q, box_q, _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, gmem(p.dout, shape_q, p.do_strides), smem_q, box_q, _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, gmem(p.k, shape_k, p.k_strides), smem_k, box_k, _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, gmem(p.v, shape_k, p.v_strides), smem_k, box_k, _1{}),
      shape_q,
      shape_k,
      p.lse_log2,
      p.dsum,
      p.dq_accum,
      p.dk,
      p.dv,
      p.dk_strides.batch,
      p.dk_strides.row,
      p.dk_strides.head,
      p.dv_strides.batch,
      p.dv_strides.row,
      p.dv_strides.head,
      p.dq_accum_split_stride,
      p.seqlen_q,
      p.seqlen_k,
      p.seqlen_q_rounded,
      (p.seqlen_k + kBlockN - 1) / kBlockN,
      p.head_dim,
      p.heads_q,
      p.group_size,
      1,  // kv_splits: launch_bwd_kernel decides
      p.softmax_scale,
      p.scale_log2,
      p.deterministic,
  };
  if constexpr (Traits::kDropout) {  // the d256 kernels' Params have no dropout fields
    params.dropout_seed = p.dropout_seed;
    params.dropout_offset = p.dropout_offset;
    params.dropout_keep_max = p.dropout_keep_max;
    params.dropout_scale = p.dropout_scale;
  }
  if constexpr (Traits::kScoreOptions) {  // the score-option kernels (bwd_score_options.h)
    params.window_left = p.window_left;
    params.window_right = p.window_right;
    params.softcap = p.softcap;
    params.softcap_scale = p.softcap_scale;
    params.score_unit_log2 = p.score_unit_log2;
    params.alibi_unit_scale = p.alibi_unit_scale;
    params.alibi_slopes = p.alibi_slopes;
    params.alibi_batch_stride = p.alibi_batch_stride;
  }
  if constexpr (BwdParamsHaveVarlen<typename Traits::Params>::value) {
    if (varlen) {
      params.cu_seqlens_q = p.cu_seqlens_q;
      params.cu_seqlens_k = p.cu_seqlens_k;
      params.total_q = p.total_q;
      params.total_k = p.total_k;
      params.varlen_work = reinterpret_cast<int2 const*>(p.varlen_work);
    }
    params.batch = p.batch;
  }
  return params;
}

// CTAs (a cluster along y) that split a kv head's group of query heads (bwd_cluster_reduce.h).
// Splitting pays when the grid is small next to the GPU (a few waves of CTAs, each sweeping
// group_size query heads; causal block 0 the longest); each CTA then also loads K and V and sums
// through DSMEM (about 2 x 64 KB of fp32 per CTA at d128). `columns` is the grid's x: key blocks,
// or dq_accum slices in deterministic mode (there the sum is as ordered as the default mode's, and
// each slice keeps one writer per query head: the split CTAs sweep different heads).
// Measured on the H100 (docs/tuning/backward_sm90.md, run 5; GQA 4:1 and 8:1 causal, d64/d128,
// 4k/8k): in the default mode 2 CTAs a group beat 4 in 7 of 8 cells (+11 to +15 % at 8k, -2 to
// +11 % at 4k) and no split by -1 to +32 %; in deterministic mode (a grid of about one wave) 4
// beat 2 by 1-8 %. Groups of 16 and more keep 4 below 4 waves (not measured).
// `columns` x `depth` is the grid's x and z (depth -1: batch; varlen's default grid: slots x 1).
inline int bwd_kv_splits(const BwdParams& p, int columns, int depth = -1) {
  if (p.forced_kv_splits > 0) return p.forced_kv_splits;
  if (p.group_size < 2) return 1;
  const std::int64_t ctas = static_cast<std::int64_t>(columns) * p.heads_kv * (depth < 0 ? p.batch : depth);
  const std::int64_t wave = p.device.sm_count > 0 ? p.device.sm_count : 132;
  const bool four_pay = p.deterministic || p.group_size >= 16;
  if (four_pay && p.group_size % 4 == 0 && ctas < 4 * wave) return 4;
  if (p.group_size % 2 == 0 && ctas < 8 * wave) return 2;
  return 1;
}

// A forced split (tests, the dev harness) the kernels cannot take is refused, naming the argument.
inline Status check_kv_splits(const BwdParams& p, int splits) {
  if (splits != 1 && splits != 2 && splits != 4) {
    return Status::InvalidArgument("flashcore::backward: forced_kv_splits must be 1, 2 or 4, got " +
                                   std::to_string(splits));
  }
  if (p.group_size % splits != 0) {
    return Status::InvalidArgument("flashcore::backward: forced_kv_splits (" + std::to_string(splits) +
                                   ") must divide the query heads per kv head (" + std::to_string(p.group_size) + ")");
  }
  return Status::Ok();
}

// Devices past this many set the smem limit on every call and ask about clusters every call.
constexpr int kBwdTrackedDevices = 64;

// Raises kKernel's dynamic shared memory limit to kSmemBytes once per device (a driver round trip
// per call shows in small-shape latency). The flag holds the kernel's address, not a bool, for the
// reason fwd_launch_template.h gives: a second copy of the library in the process shares this static.
template <auto kKernel, int kSmemBytes>
Status opt_in_bwd_smem_once(int device) {
  static std::atomic<const void*> configured[kBwdTrackedDevices] = {};
  const void* const id = reinterpret_cast<const void*>(kKernel);
  const bool tracked = device >= 0 && device < kBwdTrackedDevices;
  if (tracked && configured[device].load(std::memory_order_acquire) == id) return Status::Ok();
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  if (tracked) configured[device].store(id, std::memory_order_release);
  return Status::Ok();
}

// Whether clusters of `splits` CTAs of the split kernel can be resident on the device at all: a
// MIG slice or a context limited to part of the GPU may hold none, and then the launch would fail
// where the unsplit kernel runs. Asked of the driver once per device and split count (2 or 4);
// a failed query counts as "no", since the unsplit kernel is always correct.
template <class Traits, class Kernel>
bool bwd_clusters_fit(Kernel kernel, int device, int splits) {
  static std::atomic<int> answer[kBwdTrackedDevices][2] = {};  // 0 not asked, 1 fits, 2 does not
  const bool tracked = device >= 0 && device < kBwdTrackedDevices;
  const int slot = splits == 4 ? 1 : 0;
  if (tracked) {
    const int known = answer[device][slot].load(std::memory_order_relaxed);
    if (known != 0) return known == 1;
  }
  cudaLaunchAttribute cluster = cluster_dimension(1, unsigned(splits));
  cudaLaunchConfig_t config =
      cluster_launch_config(dim3(1, unsigned(splits), 1), Traits::kThreads, Traits::kSmemBytes, nullptr, &cluster);
  int clusters = 0;
  const bool fits = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) == cudaSuccess && clusters > 0;
  if (!fits) (void)cudaGetLastError();  // clear it: the call falls back, it does not fail
  if (tracked) answer[device][slot].store(fits ? 1 : 2, std::memory_order_relaxed);
  return fits;
}

template <class Traits, bool kSingleBlock>
Status launch_bwd_kernel(const BwdParams& p, cudaStream_t stream) {
  typename Traits::Params params = make_bwd_kernel_params<Traits>(p);
  constexpr int kSmemBytes = Traits::kSmemBytes;
  // Varlen, default mode: x walks the sequences' key-block slots (bwd_sequence.h), z is 1;
  // deterministic mode keeps (slices, ., sequences).
  const bool slots = kSingleBlock && p.cu_seqlens_q != nullptr;
  const int columns =
      slots ? BwdWork::slots(p.total_k, p.batch, Traits::kBlockN) : kSingleBlock ? params.n_blocks : p.num_splits;
  const int depth = slots ? 1 : p.batch;
  params.kv_splits = bwd_kv_splits(p, columns, depth);
  const Status valid = check_kv_splits(p, params.kv_splits);
  if (!valid.ok()) return valid;
  auto split_kernel = &bwd_kernel<Traits, kSingleBlock, /*kKvSplit=*/true>;
  if (params.kv_splits > 1) {
    const Status opted_in = opt_in_bwd_smem_once<&bwd_kernel<Traits, kSingleBlock, true>, kSmemBytes>(p.device.ordinal);
    if (!opted_in.ok()) return opted_in;
    if (!bwd_clusters_fit<Traits>(split_kernel, p.device.ordinal, params.kv_splits)) params.kv_splits = 1;
  }
  const dim3 grid(columns, p.heads_kv * params.kv_splits, depth);
  if constexpr (Traits::kTailLongestFirst && kSingleBlock) {
    if (!slots) {  // dense default grid: its tail's longest sweeps first (bwd_tile_order.h)
      params.tail_units = bwd_tail_units(p.heads_kv * p.batch, columns, p.group_size / params.kv_splits, p.seqlen_q,
                                         Traits::kHeadDim, int(sizeof(typename Traits::Element)),
                                         p.device.sm_count > 0 ? p.device.sm_count : 132, params.kv_splits);
    }
  }
  if (slots) {  // the work list every head's CTAs walk (bwd_varlen_order.h)
    if (p.varlen_work == nullptr || bwd_tile_size(Traits::kHeadDim).block_n != Traits::kBlockN) {
      return Status::Internal("flashcore::backward: the sm90 varlen backward's work list is missing from the workspace");
    }
    const BwdVarlenOrderParams order{p.cu_seqlens_q, p.cu_seqlens_k, p.batch,    p.total_q,
                                     p.total_k,      p.seqlen_q,     p.seqlen_k, columns,
                                     reinterpret_cast<int2*>(p.varlen_work), bwd_varlen_order_mode()};
    bwd_varlen_order_kernel<Traits::kBlockM, Traits::kBlockN, Traits::kIsCausal>
        <<<1, kVarlenOrderThreads, 0, stream>>>(order);
    FLASHCORE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  if (params.kv_splits == 1) {
    auto kernel = &bwd_kernel<Traits, kSingleBlock>;
    const Status opted_in = opt_in_bwd_smem_once<&bwd_kernel<Traits, kSingleBlock>, kSmemBytes>(p.device.ordinal);
    if (!opted_in.ok()) return opted_in;
    kernel<<<grid, Traits::kThreads, kSmemBytes, stream>>>(params);
    return cuda_status(cudaGetLastError(), "flashcore::backward: launching the sm90 backward kernel");
  }
  cudaLaunchAttribute cluster = cluster_dimension(1, static_cast<unsigned>(params.kv_splits));
  cudaLaunchConfig_t config = cluster_launch_config(grid, Traits::kThreads, kSmemBytes, stream, &cluster);
  return cuda_status(cudaLaunchKernelEx(&config, split_kernel, params),
                     "flashcore::backward: launching the sm90 backward kernel (query-head groups split over clusters)");
}

// The pass every sm90 backward arrangement runs, in stream order: preprocess (D, lse_log2, and
// dq_accum zeroed) -> the main kernel(s) (`launch_main`, the arrangement's choice of instance) ->
// the dQ conversion. Traits is any of the arrangement's traits (the causal and non-causal ones
// share the tile, the smem size and the dQ fragment). The workspace (lse_log2, dsum, dq_accum
// slices) is the caller's, carved from plan_bwd_workspace's plan with the kernel's head dim:
// rows of seqlen_q_rounded per (batch, query head), kHeadDim floats a dq_accum row, a query
// block's tile one run of kBlockM rows, one slice per dq_accum split.
template <class Traits, class LaunchMain>
Status run_bwd_pass(const BwdParams& p, cudaStream_t stream, LaunchMain&& launch_main) {
  static_assert(kBwdSeqlenQRounding % Traits::kBlockM == 0 && kBwdSeqlenQRounding % sm80::kPreprocessRowsPerCta == 0);
  // Window, softcap and ALiBi only in the kScoreOptions kernels (run_bwd_options, d <= 128); the
  // dispatch (the rows' options masks) never sends them elsewhere. window_right is 0 whenever
  // causal (params.h): that is no window. Dropout only in the kDropout kernels (run_bwd_dropout).
  if constexpr (!Traits::kScoreOptions) {
    if (p.window_left >= 0 || (!p.causal && p.window_right >= 0) || p.softcap > 0.0f || p.alibi_slopes != nullptr) {
      return Status::NotSupported("flashcore::backward: this sm90 backward kernel has no sliding window, softcap or "
                                  "ALiBi (the score-option kernels are at head_dim <= 128)");
    }
  }
  if (p.has_dropout && !Traits::kDropout) {
    return Status::NotSupported("flashcore::backward: dropout_p: this sm90 backward kernel has no dropout");
  }
  // Varlen in the d <= 128 plain kernels only (bwd_sequence.h; generate.py's per-head-dim options):
  // dropout's stream and the d > 128 kernels' Params are dense-only.
  if (p.cu_seqlens_q != nullptr && (p.has_dropout || !BwdParamsHaveVarlen<typename Traits::Params>::value)) {
    return Status::NotSupported("flashcore::backward: cu_seqlens_q: this sm90 backward kernel serves no variable-length "
                                "batches with dropout or at head_dim > 128");
  }
  if (p.device.max_smem_per_block != 0 && p.device.max_smem_per_block < Traits::kSmemBytes) {
    return Status::NotSupported("flashcore::backward: the sm90 backward kernel for head_dim " +
                                std::to_string(p.head_dim) + " needs " + std::to_string(Traits::kSmemBytes) +
                                " bytes of shared memory per block; device " + std::to_string(p.device.ordinal) +
                                " offers " + std::to_string(p.device.max_smem_per_block));
  }
  // The preprocess also zeroes dq_accum (its rows are the preprocess's rows, kHeadDim floats each):
  // one pass less than a memset, which took 41 us of a 1.5 ms d128 backward on the H100
  // (docs/tuning/backward_sm90.md, run 5).
  const dim3 preprocess_grid(p.seqlen_q_rounded / sm80::kPreprocessRowsPerCta, p.heads_q, p.batch);
  sm80::bwd_preprocess_kernel<typename Traits::Element, Traits::kHeadDim, kBwdSeqlenQRounding>
      <<<preprocess_grid, sm80::kPreprocessThreads, 0, stream>>>(p);
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaGetLastError());

  const Status status = launch_main();
  if (!status.ok()) return status;

  const dim3 convert_grid((p.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM, p.heads_q, p.batch);
  bwd_convert_dq_kernel<Traits><<<convert_grid, Traits::kConsumerThreads, 0, stream>>>(p);
  return cuda_status(cudaGetLastError(), "flashcore::backward: launching the sm90 dQ conversion kernel");
}

// The d <= 128 arrangement's pass (causal and not share the tiles).
// kSingleBlockKernel: the default mode runs a second kernel instance without the key-block loop
// (bwd_kernel.h); off, both modes share the looping kernel (half the kernels to compile).
// TraitsDet / TraitsDetCausal: deterministic mode's kernels, where they differ (the same tile and
// dQ fragment, so one convert kernel serves both modes).
template <class Traits, class TraitsCausal, bool kSingleBlockKernel = false, class TraitsDet = Traits,
          class TraitsDetCausal = TraitsCausal>
Status run_bwd_with_traits(const BwdParams& p, cudaStream_t stream) {
  static_assert(Traits::kBlockM == TraitsDet::kBlockM && Traits::kHeadDim == TraitsDet::kHeadDim);
  return run_bwd_pass<Traits>(p, stream, [&]() -> Status {
    if constexpr (kSingleBlockKernel) {
      if (!p.deterministic) {
        return p.causal ? launch_bwd_kernel<TraitsCausal, true>(p, stream) : launch_bwd_kernel<Traits, true>(p, stream);
      }
    }
    return p.causal ? launch_bwd_kernel<TraitsDetCausal, false>(p, stream) : launch_bwd_kernel<TraitsDet, false>(p, stream);
  });
}

// dS by stmatrix and a single-block kernel for the default mode: on the H100 at d128 bf16 they took
// the backward from 399-435 to 485-503 TFLOP/s (0.73-0.79x -> 0.89-0.92x cuDNN;
// docs/tuning/backward_sm90.md, device run 1), at the cost of 4 main kernels per TU instead of 2.
// dQ before dK (kDqFirst): 0.84-0.97x -> 0.94-0.96x cuDNN at d128 bf16 (device run 2).
template <typename Element, int kHeadDim, bool kIsCausal, bool kDsStsm = true, bool kDqFirst = true, bool kDqWriter = false,
          bool kDropout = false, bool kScoreOptions = false, bool kTailLongestFirst = false>
using BwdTraitsFor = BwdTraits<Element, kHeadDim, bwd_tile_size(kHeadDim).block_m, bwd_tile_size(kHeadDim).block_n,
                               bwd_tile_size(kHeadDim).stages, kIsCausal, kDsStsm, kDqFirst, kDqWriter, kDropout,
                               kScoreOptions, kTailLongestFirst>;

// d > 128: dK and dV transposed, the warpgroups splitting d (bwd_swapkv_launch_template.h, below).
template <typename Element, int kHeadDim>
Status run_bwd_swapkv(const BwdParams& params, cudaStream_t stream);

template <typename Element, int kHeadDim>
Status run_bwd(const BwdParams& params, cudaStream_t stream) {
  if constexpr (kHeadDim > 128) {
    return run_bwd_swapkv<Element, kHeadDim>(params, stream);
  } else {
    // The dQ writer warp (bwd_dq_writer.h) in the default mode at d128: on the H100 at bf16, +0 to
    // +6.6 % non-causal, -2.6 to +4.8 % causal, ahead in 34 of 36 cells over two runs
    // (docs/tuning/backward_sm90.md, runs 10-11); at d96 +2.3 to +9.4 % in every cell, bf16 and
    // fp16 (runs 13-14). Not at d64 (run 13: -0.8 to -4.5 % in 8 of 8 cells: its 128 x 128 step keeps the
    // consumers busier than the writer's barrier pair saves) and not in deterministic mode
    // (unmeasured; its looping kernels spill 2-3x more with it).
    constexpr bool kDqWriter = kHeadDim == 128 || kHeadDim == 96;
    // Causal at d128: the grid's tail units longest sweep first (bwd_tile_order.h): on the H100
    // +7.6 % mean over 9 bf16 causal cells (+15.5 % at GQA 8:1 2k/4k, 0 at 8k; run 14), fp16
    // +6.8 to +14.2 %. Not measured at d64 / d96.
    constexpr bool kTailLongestFirst = kHeadDim == 128;
    return run_bwd_with_traits<BwdTraitsFor<Element, kHeadDim, false, true, true, kDqWriter>,
                               BwdTraitsFor<Element, kHeadDim, true, true, true, kDqWriter, false, false, kTailLongestFirst>,
                               /*kSingleBlockKernel=*/true, BwdTraitsFor<Element, kHeadDim, false>,
                               BwdTraitsFor<Element, kHeadDim, true>>(params, stream);
  }
}

// The dropout kernels (bwd_dropout.h; generate.py's sm90 "variants": d128 only, 2 files): the
// plain kernels' tiles with the keep bits drawn again each step, a kernel instance of their own so
// the plain kernels carry no dropout code or shared memory.
// The same arrangement as run_bwd's (the dQ writer warp at d128 in the default mode).
template <typename Element, int kHeadDim>
Status run_bwd_dropout(const BwdParams& params, cudaStream_t stream) {
  static_assert(kHeadDim <= 128, "the dropout kernels use the 64-key-per-warpgroup tiles (d <= 128)");
  constexpr bool kDqWriter = kHeadDim == 128;
  return run_bwd_with_traits<BwdTraitsFor<Element, kHeadDim, false, true, true, kDqWriter, true>,
                             BwdTraitsFor<Element, kHeadDim, true, true, true, kDqWriter, true>, /*kSingleBlockKernel=*/true,
                             BwdTraitsFor<Element, kHeadDim, false, true, true, false, true>,
                             BwdTraitsFor<Element, kHeadDim, true, true, true, false, true>>(params, stream);
}

// The score-option kernels (bwd_score_options.h; generate.py's sm90 "variants": sliding window,
// softcap, ALiBi and varlen, d128 only, 2 files; d <= 128 runs on them padded): the plain kernels'
// tiles and arrangement, the window's query-block range and the options' score step a kernel
// instance of their own, so the plain kernels carry none of it.
template <typename Element, int kHeadDim>
Status run_bwd_options(const BwdParams& params, cudaStream_t stream) {
  static_assert(kHeadDim <= 128, "the score-option kernels use the 64-key-per-warpgroup tiles (d <= 128)");
  constexpr bool kDqWriter = kHeadDim == 128;
  return run_bwd_with_traits<BwdTraitsFor<Element, kHeadDim, false, true, true, kDqWriter, false, true>,
                             BwdTraitsFor<Element, kHeadDim, true, true, true, kDqWriter, false, true>,
                             /*kSingleBlockKernel=*/true,
                             BwdTraitsFor<Element, kHeadDim, false, true, true, false, false, true>,
                             BwdTraitsFor<Element, kHeadDim, true, true, true, false, false, true>>(params, stream);
}

}  // namespace flashcore::cuda::sm90

#include "cuda/sm90/bwd_swapkv_launch_template.h"
