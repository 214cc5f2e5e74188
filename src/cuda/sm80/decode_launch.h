// The sm80 family's decode entry point (forward_kvcache) for dispatch.cu, instantiated one (dtype,
// head dim) per file in src/cuda/instantiations/. Serves any head_dim up to kHeadDim (a multiple of
// 8); runs on every GPU from sm80 on (FP32 FMAs and cp.async, no architecture-specific MMA).
#pragma once

#include <cuda_runtime.h>

#include <cutlass/numeric_types.h>

#include "cuda/params.h"
#include "flashcore/tensor.h"

namespace flashcore::cuda::sm80 {

template <typename Element, int kHeadDim>
Status run_decode(const DecodeParams& params, cudaStream_t stream);

}  // namespace flashcore::cuda::sm80
