// Dev only: A/B variants of the sm90 backward for the harness (capi.cu dispatches kernel_dim
// 1000 + v). Variant 2: bf16 d128, the default with dQ issued before dK and its partial sent while
// dK runs (BwdTraits::kDqFirst). (Variant 1, the first version, was measured in run 1 and removed:
// docs/tuning/backward_sm90.md.)
#include "cuda/sm90/bwd_launch_template.h"

namespace flashcore::cuda::sm90 {

Status run_bwd_variant(int variant, const BwdParams& p, cudaStream_t s) {
  using bf16 = cutlass::bfloat16_t;
  if (variant == 2) {
    return run_bwd_with_traits<BwdTraitsFor<bf16, 128, false, true, true>, BwdTraitsFor<bf16, 128, true, true, true>,
                               true>(p, s);
  }
  return Status::NotSupported("no such variant");
}

}  // namespace flashcore::cuda::sm90
