// The sm80 family's backward entry points for dispatch.cu: the launchers, instantiated one (dtype,
// head dim) per file in src/cuda/instantiations/ so the build parallelises, and the workspace plan.
#pragma once

#include <cuda_runtime.h>

#include "cuda/bwd_workspace.h"
#include "cuda/params.h"
#include "flashcore/tensor.h"

namespace flashcore::cuda::sm80 {

// Runs the whole backward pass on `stream`: zero dq_accum, preprocess (D, LSE), the main kernel,
// the dQ conversion. params' workspace fields must be carved from plan_bwd_workspace's plan.
template <typename Element, int kHeadDim>
Status run_bwd(const BwdParams& params, cudaStream_t stream);

// The workspace for these sizes: seqlen_q padded to kSeqlenQRounding, and in deterministic mode
// one dq_accum slice per split of the key axis (bwd_workspace.cu says how many).
BwdWorkspace plan_bwd_workspace(const BwdParams& params, int kernel_head_dim);

}  // namespace flashcore::cuda::sm80
