// Launch of the sm80 forward kernel for one (dtype, head dim); included only by the generated
// instantiation files in src/cuda/instantiations/.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_variant.h"
#include "cuda/sm80/fwd_kernel.h"
#include "cuda/sm80/fwd_launch.h"
#include "cuda/sm80/fwd_traits.h"
#include "cuda/sm80/tile_size.h"

namespace flashcore::cuda::sm80 {

template <class Traits, bool kIsCausal, KernelVariant kVariant>
Status launch_fwd(const FwdParams& params, cudaStream_t stream) {
  auto kernel = &fwd_kernel<Traits, kIsCausal, kVariant>;
  constexpr int kSmemBytes = Traits::kSmemBytes;
  if constexpr (kSmemBytes > 48 * 1024) {
    FLASHCORE_CUDA_RETURN_IF_ERROR(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  }
  const dim3 grid = SingleTileScheduler<kIsCausal>::grid((params.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM,
                                                          params.heads_q, params.batch);
  kernel<<<grid, Traits::kNThreads, kSmemBytes, stream>>>(params);
  return cuda_status(cudaGetLastError(), "flashcore::forward: launching the sm80 forward kernel");
}

template <typename Element, int kHeadDim, bool kIsCausal>
using FwdTraitsFor = FwdTraits<Element, kHeadDim, fwd_tile_size(kHeadDim, kIsCausal).block_m,
                               fwd_tile_size(kHeadDim, kIsCausal).block_n, fwd_tile_size(kHeadDim, kIsCausal).warps,
                               fwd_tile_size(kHeadDim, kIsCausal).kv_stages>;

// Six kernels per (dtype, head dim): causal or not, times the variant (common/kernel_variant.h):
// plain, window, or score options (softcap, ALiBi, with the window). A plain call runs code with no
// trace of any option, a window-only call none of the score options' (~12% at d = 128, v9).
template <typename Element, int kHeadDim, KernelVariant kVariant>
Status run_fwd_variant(const FwdParams& params, cudaStream_t stream) {
  return params.causal ? launch_fwd<FwdTraitsFor<Element, kHeadDim, true>, true, kVariant>(params, stream)
                       : launch_fwd<FwdTraitsFor<Element, kHeadDim, false>, false, kVariant>(params, stream);
}

template <typename Element, int kHeadDim>
Status run_fwd(const FwdParams& params, cudaStream_t stream) {
  switch (kernel_variant(params)) {
    case KernelVariant::kScoreMod: return run_fwd_variant<Element, kHeadDim, KernelVariant::kScoreMod>(params, stream);
    case KernelVariant::kWindow: return run_fwd_variant<Element, kHeadDim, KernelVariant::kWindow>(params, stream);
    case KernelVariant::kPlain: break;
  }
  return run_fwd_variant<Element, kHeadDim, KernelVariant::kPlain>(params, stream);
}

}  // namespace flashcore::cuda::sm80
