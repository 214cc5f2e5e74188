// Dev only: A/B variants of the sm90 backward for the harness (capi.cu dispatches kernel_dim
// 1000 + v). Variant 10, bf16 d128: the default mode before device run 10, each consumer warp
// adding its own dQ partial (in run 10 it was the other way round: variant 10 was the dQ writer
// warp, BwdTraits::kDqWriter, and variant 11 the writer with the producer at 32 registers, which
// hung: bwd_traits.h says why).
// Variants 8 and 9 (left out with -DFC_BWD_NO_D256_VARIANTS), bf16 d256: variant 9 is the d256 kernel as it was before device run 8 (no GQA
// cluster split, the looping deterministic kernel), the baseline for A/B runs; variant 8 is the
// deterministic rounds as run 8 measured them (no GQA split anywhere). Run 8's variant 7 (the
// split) and variant 8 became the library's d256 path, the rounds with the split since run 9.
// Earlier: variants 1-3 measured in device runs 1-2; variant 4 (the d64 64 x 128 tile) in run 3,
// dropped from this file in session 9 (git history has it); variants 5-6 (the overlapped consumer
// schedule) in run 3: dev/sm90_bwd/variant_overlap.patch; docs/tuning/backward_sm90.md.
#include "cuda/sm90/bwd_launch_template.h"

namespace flashcore::cuda::sm90 {

Status run_bwd_variant(int variant, const BwdParams& p, cudaStream_t s) {
  using bf16 = cutlass::bfloat16_t;
#ifndef FC_BWD_NO_D256_VARIANTS
  if (variant == 8) {  // run 8's rounds: deterministic mode without the GQA split, default mode unsplit
    return run_bwd_swapkv_with<bf16, 256, /*kAllowKvSplit=*/false, /*kDeterministicRounds=*/true>(p, s);
  }
  if (variant == 9) {  // d256 before run 8: no GQA split, deterministic mode by the looping kernel
    return run_bwd_swapkv_with<bf16, 256, /*kAllowKvSplit=*/false, /*kDeterministicRounds=*/false>(p, s);
  }
#endif
  if (variant == 10) {  // d128 before run 10: every consumer warp adds its own dQ partial (no writer warp)
    return run_bwd_with_traits<BwdTraitsFor<bf16, 128, false>, BwdTraitsFor<bf16, 128, true>,
                               /*kSingleBlockKernel=*/true>(p, s);
  }
  return Status::NotSupported("no such variant");
}

}  // namespace flashcore::cuda::sm90
