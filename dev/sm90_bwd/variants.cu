// Dev only: A/B variants of the sm90 backward for the harness (capi.cu dispatches kernel_dim
// 1000 + v). Variant 4: bf16 d64 with kBlockM = 128 (FlashAttention-3's d64 tile), against the
// default 64 x 128. Variants 5 and 6: the overlapped consumer schedule (BwdTraits::kOverlap: the
// next query block's Sᵀ/dPᵀ issued before this block's dK, 3 Q/dO stages) at bf16 d128 and d64
// (64 x 128). (Variants 1-3 were measured in device runs 1-2 and removed:
// docs/tuning/backward_sm90.md.)
#include "cuda/sm90/bwd_launch_template.h"

namespace flashcore::cuda::sm90 {

Status run_bwd_variant(int variant, const BwdParams& p, cudaStream_t s) {
  using bf16 = cutlass::bfloat16_t;
  if (variant == 4) {
    return run_bwd_with_traits<BwdTraits<bf16, 64, 128, 128, 2, false, true, true>,
                               BwdTraits<bf16, 64, 128, 128, 2, true, true, true>, true>(p, s);
  }
  if (variant == 5) {
    return run_bwd_with_traits<BwdTraits<bf16, 128, 64, 128, 3, false, true, true, true>,
                               BwdTraits<bf16, 128, 64, 128, 3, true, true, true, true>, true>(p, s);
  }
  if (variant == 6) {
    return run_bwd_with_traits<BwdTraits<bf16, 64, 64, 128, 3, false, true, true, true>,
                               BwdTraits<bf16, 64, 64, 128, 3, true, true, true, true>, true>(p, s);
  }
  return Status::NotSupported("no such variant");
}

}  // namespace flashcore::cuda::sm90
