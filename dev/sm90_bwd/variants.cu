// Dev only: A/B variants of the sm90 backward for the harness (capi.cu dispatches kernel_dim
// 1000 + v). Variant 3: bf16 d128 as before run 2 (dQ issued after dK, its partial sent once both
// retired; BwdTraits::kDqFirst off), to A/B against today's default. Variant 4: bf16 d64 with
// kBlockM = 128 (FlashAttention-3's d64 tile; 0 B of spills in the single-block kernels, 20-40 B
// in the looping ones), to A/B against the default 64 x 128; not run yet. (Variant 1, the first version,
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
  if (variant == 4) {
    return run_bwd_with_traits<BwdTraits<bf16, 64, 128, 128, 2, false, true, true>,
                               BwdTraits<bf16, 64, 128, 128, 2, true, true, true>, true>(p, s);
  }
  return Status::NotSupported("no such variant");
}

}  // namespace flashcore::cuda::sm90
