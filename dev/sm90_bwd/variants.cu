// Dev only: A/B variants of the sm90 backward for the harness (capi.cu dispatches kernel_dim
// 1000 + v; fc_sm90_bwd_variant_dim gives each variant's head dim).
//   12 and 14 (left out with -DFC_BWD_NO_D256_VARIANTS), bf16 d256, device run d256-1: the
//       library's d256 path (bwd_swapkv_launch_template.h) with its session-11 steps turned off:
//       12 both (dQᵀ last, the grid's own order: the d256 kernel of session 10), 14 dQᵀ last only
//       (the causal order on). So library / 14 is dQᵀ first, 14 / 12 the causal order (no variant
//       13 at d256: it would compile a second copy of the library's kernels).
//   (16-18, bf16: session 12's device run 13: 16 the dQ writer at d64 (rejected), 17 at d96 and 18
//       the causal d128 tail longest-first (both the library's since): git history has them.)
// Earlier: variants 1-3 measured in device runs 1-2; variant 4 (the d64 64 x 128 tile) in run 3,
// dropped from this file in session 9 (git history has it); variants 5-6 (the overlapped consumer
// schedule) in run 3: dev/sm90_bwd/variant_overlap.patch; variants 8 and 9 (run 8's rounds without
// the split; the d256 path before run 8) and 10-11 (the dQ writer warp and the per-warp adds, runs
// 10-11) dropped in session 11 (git history has them); d128 variants 12 (dV issued before the dPᵀ
// wait) and 15 (causal CTAs longest first) of run 12, rejected: dev/sm90_bwd/variant_run12.patch
// (docs/tuning/backward_sm90.md, run 12).
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
  return Status::NotSupported("no such variant");
}

}  // namespace flashcore::cuda::sm90
