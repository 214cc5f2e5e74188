// The sm90 (Hopper, sm_90a) family's backward entry points for dispatch.cu, the same pair every
// family provides (docs/kernel_families.md): the launcher, instantiated one (dtype, head dim) per
// file in src/cuda/instantiations/bwd_sm90_*.cu (built for sm_90a only), and the workspace plan.
#pragma once

#include <cuda_runtime.h>

#include "cuda/bwd_workspace.h"
#include "cuda/params.h"
#include "flashcore/tensor.h"

namespace flashcore::cuda::sm90 {

// Runs the whole backward pass on `stream`: zero dq_accum, preprocess (D, LSE), the main kernel,
// the dQ conversion. Serves head_dim <= kHeadDim. params' workspace fields must be carved from
// plan_bwd_workspace's plan.
template <typename Element, int kHeadDim>
Status run_bwd(const BwdParams& params, cudaStream_t stream);

// Dropout (bwd_dropout.h): rows of their own in the dispatch table (generate.py's "variants").
template <typename Element, int kHeadDim>
Status run_bwd_dropout(const BwdParams& params, cudaStream_t stream);

// Sliding window, softcap and ALiBi (bwd_score_options.h): rows of their own too.
template <typename Element, int kHeadDim>
Status run_bwd_options(const BwdParams& params, cudaStream_t stream);

// The workspace: seqlen_q padded to kBwdSeqlenQRounding, dQ rows of kernel_head_dim floats, one
// dq_accum slice, or in deterministic mode one per CTA column along the key axis (about a wave of
// CTAs, at most 16; bwd_workspace.cu).
BwdWorkspace plan_bwd_workspace(const BwdParams& params, int kernel_head_dim);

}  // namespace flashcore::cuda::sm90
