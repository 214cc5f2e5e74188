// Dev only: A/B variants of the sm90 backward for the harness (capi.cu dispatches kernel_dim
// 1000 + v; fc_sm90_bwd_variant_dim gives each variant's head dim).
//   13, bf16 d64: the default mode with the dQ writer warp (bwd_dq_writer.h), as d128 has it
//       since run 11. 14, bf16 d96: the same. Written in session 11 for the next device run
//       (item 3 of session 11; compile-checked, not run): time them against the library's d64 /
//       d96 (`ab AB_DIMS=64,96 AB_VARIANTS=13,14`, with the TUs bwd_sm90_bf16_hdim{64,96} in the
//       harness library).
// Variants 8 and 9 (left out with -DFC_BWD_NO_D256_VARIANTS), bf16 d256: variant 9 is the d256 kernel as it was before device run 8 (no GQA
// cluster split, the looping deterministic kernel), the baseline for A/B runs; variant 8 is the
// deterministic rounds as run 8 measured them (no GQA split anywhere). Run 8's variant 7 (the
// split) and variant 8 became the library's d256 path, the rounds with the split since run 9.
// Earlier: variants 1-3 measured in device runs 1-2; variant 4 (the d64 64 x 128 tile) in run 3,
// dropped from this file in session 9 (git history has it); variants 5-6 (the overlapped consumer
// schedule) in run 3: dev/sm90_bwd/variant_overlap.patch; variants 10-11 (the dQ writer warp and
// the per-warp adds) in runs 10-11, dropped in session 11; variants 12 (dV issued before the dPᵀ
// wait) and 15 (causal CTAs longest first) in run 12, rejected: dev/sm90_bwd/variant_run12.patch
// (docs/tuning/backward_sm90.md, run 12).
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
  // Deterministic mode as the library runs it (the per-warp adds: run_bwd's TraitsDet).
  if (variant == 13) {  // d64 with the dQ writer warp
    return run_bwd_with_traits<BwdTraitsFor<bf16, 64, false, true, true, true>, BwdTraitsFor<bf16, 64, true, true, true, true>,
                               /*kSingleBlockKernel=*/true, BwdTraitsFor<bf16, 64, false>, BwdTraitsFor<bf16, 64, true>>(p, s);
  }
  if (variant == 14) {  // d96 with the dQ writer warp
    return run_bwd_with_traits<BwdTraitsFor<bf16, 96, false, true, true, true>, BwdTraitsFor<bf16, 96, true, true, true, true>,
                               /*kSingleBlockKernel=*/true, BwdTraitsFor<bf16, 96, false>, BwdTraitsFor<bf16, 96, true>>(p, s);
  }
  return Status::NotSupported("no such variant");
}

}  // namespace flashcore::cuda::sm90
