// Declaration of the sm90 (Hopper, sm_90a) forward launchers; definitions are instantiated one
// (dtype, head dim) per file in src/cuda/instantiations/fwd_sm90_*.cu, built for sm_90a only.
#pragma once

#include <cuda_runtime.h>

#include "cuda/params.h"
#include "flashcore/tensor.h"

namespace flashcore::cuda::sm90 {

// Serves head_dim <= kHeadDim (columns past head_dim read as zero and are not written).
template <typename Element, int kHeadDim>
Status run_fwd(const FwdParams& params, cudaStream_t stream);

// The same with the sliding window, softcap and ALiBi (fwd_score_options.h); instantiated for
// fewer head dims, in src/cuda/instantiations/fwd_sm90_*_options.cu.
template <typename Element, int kHeadDim>
Status run_fwd_options(const FwdParams& params, cudaStream_t stream);

}  // namespace flashcore::cuda::sm90
