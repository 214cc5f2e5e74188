// Declaration of the sm80 backward launchers; definitions are instantiated one (dtype, head dim)
// per file in src/cuda/instantiations/ so the build parallelises.
#pragma once

#include <cuda_runtime.h>

#include "cuda/sm80/bwd_params.h"
#include "flashcore/tensor.h"

namespace flashcore::cuda::sm80 {

// Runs the whole backward pass on `stream`: zero dq_accum, preprocess (D, LSE), the main kernel,
// the dQ conversion. params' workspace pointers must be set (see bwd_params.h).
template <typename Element, int kHeadDim>
Status run_bwd(const BwdParams& params, cudaStream_t stream);

}  // namespace flashcore::cuda::sm80
