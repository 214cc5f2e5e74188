// Dev only: A/B variants of the sm90 backward for the harness (capi.cu dispatches kernel_dim
// 1000 + v). Variant 3: bf16 d128 as before run 2 (dQ issued after dK, its partial sent once both
// retired; BwdTraits::kDqFirst off), to A/B against today's default. (Variant 1, the first version,
// measured in run 1, and variant 2, kDqFirst, the default since run 2, were removed:
// docs/tuning/backward_sm90.md.)
#include "cuda/sm90/bwd_launch_template.h"

namespace flashcore::cuda::sm90 {

Status run_bwd_variant(int variant, const BwdParams& p, cudaStream_t s) {
  using bf16 = cutlass::bfloat16_t;
  if (variant == 3) {
    return run_bwd_with_traits<BwdTraitsFor<bf16, 128, false, true, false>, BwdTraitsFor<bf16, 128, true, true, false>,
                               true>(p, s);
  }
  return Status::NotSupported("no such variant");
}

}  // namespace flashcore::cuda::sm90
