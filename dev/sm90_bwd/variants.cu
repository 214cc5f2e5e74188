// Dev only: A/B variants of the sm90 backward for the harness (capi.cu dispatches kernel_dim
// 1000 + v). Variant 1: bf16 d128 as first written (dS by element stores, the looping kernel in
// both modes), to A/B against the default (stmatrix + single-block kernel).
#include "cuda/sm90/bwd_launch_template.h"

namespace flashcore::cuda::sm90 {

Status run_bwd_variant(int variant, const BwdParams& p, cudaStream_t s) {
  using bf16 = cutlass::bfloat16_t;
  if (variant == 1) {  // the first version: element stores of dS, one looping kernel for both modes
    return run_bwd_with_traits<BwdTraitsFor<bf16, 128, false, false>, BwdTraitsFor<bf16, 128, true, false>, false>(p, s);
  }
  return Status::NotSupported("no such variant");
}

}  // namespace flashcore::cuda::sm90
