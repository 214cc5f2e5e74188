// The sm80 family's forward entry point for dispatch.cu, instantiated one (dtype, head dim) per
// file in src/cuda/instantiations/ so the build parallelises.
#pragma once

#include <cuda_runtime.h>

#include "cuda/params.h"
#include "flashcore/tensor.h"

namespace flashcore::cuda::sm80 {

template <typename Element, int kHeadDim>
Status run_fwd(const FwdParams& params, cudaStream_t stream);

}  // namespace flashcore::cuda::sm80
