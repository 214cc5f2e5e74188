// Declaration of the sm90 decode launcher (forward_kvcache): the cluster decode kernel
// (decode_cluster_kernel.h), instantiated in src/cuda/instantiations/decode_sm90_bf16_hdim128.cu
// (sm_90a only; generate.py's "pass_dtypes"). Serves head_dim <= kHeadDim; the problems its
// heuristic keeps off the cluster kernel go to DecodeParams::fallback (the sm80 row).
#pragma once

#include <cuda_runtime.h>

#include <cutlass/numeric_types.h>

#include "cuda/params.h"
#include "flashcore/tensor.h"

namespace flashcore::cuda::sm90 {

template <typename Element, int kHeadDim>
Status run_decode(const DecodeParams& params, cudaStream_t stream);

}  // namespace flashcore::cuda::sm90
