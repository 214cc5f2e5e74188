// Dev only: A/B variants of the sm90 backward for the harness (capi.cu dispatches kernel_dim
// 1000 + v; fc_sm90_bwd_variant_dim gives each variant's head dim).
//   12 and 14 (left out with -DFC_BWD_NO_D256_VARIANTS), bf16 d256, device run d256-1: the
//       library's d256 path (bwd_swapkv_launch_template.h) with its session-11 steps turned off:
//       12 both (dQᵀ last, the grid's own order: the d256 kernel of session 10), 14 dQᵀ last only
//       (the causal order on). So library / 14 is dQᵀ first, 14 / 12 the causal order (no variant
//       13 at d256: it would compile a second copy of the library's kernels).
//   16, bf16 d64: the default mode with the dQ writer warp (bwd_dq_writer.h), as d128 has it
//       since run 11. 17, bf16 d96: the same. Written in session 11 (numbered 13 and 14 on branch
//       s11-bwd, renumbered at the merge with s11-bwd256; compile-checked, not run): time them
//       against the library's d64 / d96 (`ab AB_DIMS=64,96 AB_VARIANTS=16,17`, with the TUs
//       bwd_sm90_bf16_hdim{64,96} in the harness library). -DFC_BWD_NO_D128_VARIANTS leaves them out.
//   18, bf16 d128 (session 12; variant_lpt_tail.patch's variant, renumbered): the causal default
//       mode with only the grid's tail units ordered longest sweep first (bwd_tile_order.h,
//       bwd_tile_tail_longest_first); every other call runs the library's d128 path.
// Earlier: variants 1-3 measured in device runs 1-2; variant 4 (the d64 64 x 128 tile) in run 3,
// dropped from this file in session 9 (git history has it); variants 5-6 (the overlapped consumer
// schedule) in run 3: dev/sm90_bwd/variant_overlap.patch; variants 8 and 9 (run 8's rounds without
// the split; the d256 path before run 8) and 10-11 (the dQ writer warp and the per-warp adds, runs
// 10-11) dropped in session 11 (git history has them); d128 variants 12 (dV issued before the dPᵀ
// wait) and 15 (causal CTAs longest first) of run 12, rejected: dev/sm90_bwd/variant_run12.patch
// (docs/tuning/backward_sm90.md, run 12).
#include "cuda/sm90/bwd_launch_template.h"

namespace flashcore::cuda::sm90 {

extern template Status run_bwd<cutlass::bfloat16_t, 128>(const BwdParams& params, cudaStream_t stream);

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
  // Deterministic mode as the library runs it (the per-warp adds: run_bwd's TraitsDet).
  if (variant == 16) {  // d64 with the dQ writer warp
    return run_bwd_with_traits<BwdTraitsFor<bf16, 64, false, true, true, true>, BwdTraitsFor<bf16, 64, true, true, true, true>,
                               /*kSingleBlockKernel=*/true, BwdTraitsFor<bf16, 64, false>, BwdTraitsFor<bf16, 64, true>>(p, s);
  }
  if (variant == 17) {  // d96 with the dQ writer warp
    return run_bwd_with_traits<BwdTraitsFor<bf16, 96, false, true, true, true>, BwdTraitsFor<bf16, 96, true, true, true, true>,
                               /*kSingleBlockKernel=*/true, BwdTraitsFor<bf16, 96, false>, BwdTraitsFor<bf16, 96, true>>(p, s);
  }
  if (variant == 18) {  // d128 causal default mode: the grid's tail units longest sweep first
    using TCausal = BwdTraitsFor<bf16, 128, true, true, true, true, false, /*kTailLongestFirst=*/true>;
    if (p.deterministic || !p.causal || p.cu_seqlens_q != nullptr) return run_bwd<bf16, 128>(p, s);
    return run_bwd_pass<TCausal>(p, s, [&]() -> Status { return launch_bwd_kernel<TCausal, true>(p, s); });
  }
#endif
  return Status::NotSupported("no such variant");
}

}  // namespace flashcore::cuda::sm90
