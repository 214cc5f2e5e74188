// Dev only: A/B variants of the sm90 backward for the harness (capi.cu dispatches kernel_dim
// 1000 + v). Variant 10, bf16 d128: the default mode before device run 10, each consumer warp
// adding its own dQ partial (in run 10 it was the other way round: variant 10 was the dQ writer
// warp, BwdTraits::kDqWriter, and variant 11 the writer with the producer at 32 registers, which
// hung: bwd_traits.h says why).
// Variants 12 and 14 (left out with -DFC_BWD_NO_D256_VARIANTS), bf16 d256, device run d256-1: the
// library's d256 path (bwd_swapkv_launch_template.h) with its session-11 steps turned off: 12
// both (dQᵀ last, the grid's own order: the d256 kernel of session 10), 14 dQᵀ last only (the
// causal order on). So library / 14 is dQᵀ first, 14 / 12 the causal order (no variant 13: it
// would compile a second copy of the library's kernels). Variants 8 and 9 (run 8's rounds
// without the split; the d256 path before run 8) were dropped in session 11: git history has them.
// -DFC_BWD_NO_D128_VARIANTS leaves variant 10 out.
#include "cuda/sm90/bwd_launch_template.h"

namespace flashcore::cuda::sm90 {

Status run_bwd_variant(int variant, const BwdParams& p, cudaStream_t s) {
  using bf16 = cutlass::bfloat16_t;
#ifndef FC_BWD_NO_D256_VARIANTS
  if (variant == 12 || variant == 14) {
    constexpr bool kSplit = true, kRounds = true, kDqFirst = false;
    return variant == 12 ? run_bwd_swapkv_with<bf16, 256, kSplit, kRounds, kDqFirst, /*kCausalOrder=*/false>(p, s)
                         : run_bwd_swapkv_with<bf16, 256, kSplit, kRounds, kDqFirst, /*kCausalOrder=*/true>(p, s);
  }
#endif
#ifndef FC_BWD_NO_D128_VARIANTS
  if (variant == 10) {  // d128 before run 10: every consumer warp adds its own dQ partial (no writer warp)
    return run_bwd_with_traits<BwdTraitsFor<bf16, 128, false>, BwdTraitsFor<bf16, 128, true>,
                               /*kSingleBlockKernel=*/true>(p, s);
  }
#endif
  return Status::NotSupported("no such variant");
}

}  // namespace flashcore::cuda::sm90
