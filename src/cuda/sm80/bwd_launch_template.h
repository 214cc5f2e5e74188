// Launch of the sm80 backward pass for one (dtype, head dim); included only by the generated
// instantiation files in src/cuda/instantiations/.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_variant.h"
#include "cuda/sm80/bwd_convert_dq.h"
#include "cuda/sm80/bwd_kernel.h"
#include "cuda/sm80/bwd_launch.h"
#include "cuda/sm80/bwd_preprocess.h"
#include "cuda/sm80/bwd_tile_size.h"
#include "cuda/sm80/bwd_traits.h"

namespace flashcore::cuda::sm80 {

template <class Traits, bool kIsCausal, KernelVariant kVariant>
Status launch_bwd_kernel(const BwdParams& params, int smem_bytes, cudaStream_t stream) {
  auto kernel = &bwd_kernel<Traits, kIsCausal, kVariant>;
  if (smem_bytes > 48 * 1024) {
    FLASHCORE_CUDA_RETURN_IF_ERROR(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  }
  const int n_blocks = (params.seqlen_k + Traits::kBlockN - 1) / Traits::kBlockN;
  const dim3 grid(params.deterministic ? params.num_splits : n_blocks, params.heads_kv, params.batch);
  kernel<<<grid, Traits::kNThreads, smem_bytes, stream>>>(params);
  return cuda_status(cudaGetLastError(), "flashcore::backward: launching the sm80 backward kernel");
}

// The whole pass with one kernel configuration (run_bwd picks it; tuning harnesses try others).
template <class Traits>
Status run_bwd_with_traits(const BwdParams& params, cudaStream_t stream) {
  static_assert(kSeqlenQRounding % Traits::kBlockM == 0 && kSeqlenQRounding % kPreprocessRowsPerCta == 0);

  // The kernel's sm90 code stages dQ in shared memory (bwd_dq_accum.h). Sizing by the device, not
  // by the code the driver picks, is safe both ways: sm80 code on an sm90 device leaves the extra
  // bytes unused.
  const int smem_bytes = params.device.compute_capability >= 90 ? Traits::kSmemBytesSm90 : Traits::kSmemBytes;
  if (params.device.max_smem_per_block < smem_bytes) {
    return Status::NotSupported("flashcore::backward: the sm80 backward kernel for head_dim " +
                                std::to_string(params.head_dim) + " needs " + std::to_string(smem_bytes) +
                                " bytes of shared memory per block; device " + std::to_string(params.device.ordinal) +
                                " offers " + std::to_string(params.device.max_smem_per_block));
  }

  const std::size_t dq_accum_bytes =
      static_cast<std::size_t>(params.num_splits) * params.dq_accum_split_stride * sizeof(float);
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(params.dq_accum, 0, dq_accum_bytes, stream));

  const dim3 preprocess_grid(params.seqlen_q_rounded / kPreprocessRowsPerCta, params.heads_q, params.batch);
  bwd_preprocess_kernel<typename Traits::Element><<<preprocess_grid, kPreprocessThreads, 0, stream>>>(params);
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaGetLastError());

  // Six kernels: causal or not, times the variant (plain, window, score options; kernel_variant.h).
  Status status;
  switch (kernel_variant(params)) {
    case KernelVariant::kScoreMod:
      status = params.causal ? launch_bwd_kernel<Traits, true, KernelVariant::kScoreMod>(params, smem_bytes, stream)
                             : launch_bwd_kernel<Traits, false, KernelVariant::kScoreMod>(params, smem_bytes, stream);
      break;
    case KernelVariant::kWindow:
      status = params.causal ? launch_bwd_kernel<Traits, true, KernelVariant::kWindow>(params, smem_bytes, stream)
                             : launch_bwd_kernel<Traits, false, KernelVariant::kWindow>(params, smem_bytes, stream);
      break;
    case KernelVariant::kPlain:
      status = params.causal ? launch_bwd_kernel<Traits, true, KernelVariant::kPlain>(params, smem_bytes, stream)
                             : launch_bwd_kernel<Traits, false, KernelVariant::kPlain>(params, smem_bytes, stream);
      break;
  }
  if (!status.ok()) return status;

  const dim3 convert_grid((params.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM, params.heads_q, params.batch);
  bwd_convert_dq_kernel<Traits><<<convert_grid, Traits::kNThreads, 0, stream>>>(params);
  return cuda_status(cudaGetLastError(), "flashcore::backward: launching the dQ conversion kernel");
}

template <typename Element, int kHeadDim>
Status run_bwd(const BwdParams& params, cudaStream_t stream) {
  constexpr BwdTileSize kTile = bwd_tile_size(kHeadDim);
  using Traits = BwdTraits<Element, kHeadDim, kTile.block_m, kTile.block_n, kTile.warps, kTile.atom_m_sdp,
                           kTile.atom_n_dkv, kTile.atom_m_dq, kTile.stages>;
  return run_bwd_with_traits<Traits>(params, stream);
}

}  // namespace flashcore::cuda::sm80
