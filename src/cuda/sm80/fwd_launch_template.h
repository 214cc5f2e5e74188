// Launch of the sm80 forward kernel for one (dtype, head dim); included only by the generated
// instantiation files in src/cuda/instantiations/.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/cuda_check.h"
#include "cuda/sm80/fwd_kernel.h"
#include "cuda/sm80/fwd_launch.h"
#include "cuda/sm80/fwd_traits.h"
#include "cuda/sm80/tile_size.h"

namespace flashcore::cuda::sm80 {

template <class Traits, bool kIsCausal, bool kHasOptions>
Status launch_fwd(const FwdParams& params, cudaStream_t stream) {
  auto kernel = &fwd_kernel<Traits, kIsCausal, kHasOptions>;
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

// Four kernels per (dtype, head dim): causal or not, times plain or with options (sliding window,
// softcap, ALiBi: one option kernel serves every combination, the options being runtime data of
// it), so a plain call runs code with no trace of any option and the instantiations stay at four.
template <typename Element, int kHeadDim, bool kHasOptions>
Status run_fwd_variant(const FwdParams& params, cudaStream_t stream) {
  return params.causal ? launch_fwd<FwdTraitsFor<Element, kHeadDim, true>, true, kHasOptions>(params, stream)
                       : launch_fwd<FwdTraitsFor<Element, kHeadDim, false>, false, kHasOptions>(params, stream);
}

template <typename Element, int kHeadDim>
Status run_fwd(const FwdParams& params, cudaStream_t stream) {
  return params.has_options ? run_fwd_variant<Element, kHeadDim, true>(params, stream)
                              : run_fwd_variant<Element, kHeadDim, false>(params, stream);
}

}  // namespace flashcore::cuda::sm80
