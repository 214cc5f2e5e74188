// Dev only: A/B variants of the sm90 backward for the harness (capi.cu dispatches kernel_dim
// 1000 + v; fc_sm90_bwd_variant_dim gives each variant's head dim). Session 11 (device run 12):
//   12, bf16 d128: the default mode with dV += Pᵀ dO issued before the wait for dPᵀ
//       (BwdTraits::kDvEarly), so it runs under the dSᵀ arithmetic.
//   (13, 14: the dQ writer warp at d64 / d96, planned and not built this session: capi.cu's
//   fc_sm90_bwd_variant_dim keeps their head dims.)
//   15, bf16 d128: causal CTAs renumbered longest sweep first (BwdTraits::kCausalLpt), in chunks of
//       (kv head, batch) rows (BwdMainloop::longest_first); otherwise the library's d128 kernels.
// Variants 8 and 9 (left out with -DFC_BWD_NO_D256_VARIANTS), bf16 d256: variant 9 is the d256 kernel as it was before device run 8 (no GQA
// cluster split, the looping deterministic kernel), the baseline for A/B runs; variant 8 is the
// deterministic rounds as run 8 measured them (no GQA split anywhere). Run 8's variant 7 (the
// split) and variant 8 became the library's d256 path, the rounds with the split since run 9.
// Earlier: variants 1-3 measured in device runs 1-2; variant 4 (the d64 64 x 128 tile) in run 3,
// dropped from this file in session 9 (git history has it); variants 5-6 (the overlapped consumer
// schedule) in run 3: dev/sm90_bwd/variant_overlap.patch; variants 10-11 (the dQ writer warp and
// the per-warp adds) in runs 10-11, variant 10 dropped in session 11; docs/tuning/backward_sm90.md.
#include "cuda/sm90/bwd_launch_template.h"

namespace flashcore::cuda::sm90 {

extern template Status run_bwd<cutlass::bfloat16_t, 128>(const BwdParams& params, cudaStream_t stream);

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
  // Only the kernels a variant changes are built here; deterministic mode (and, for 15, the
  // non-causal calls) go to the library's d128 path (bwd_sm90_bf16_hdim128.cu, in the harness).
  if (variant == 12) {  // d128 default mode: dV issued early (with the writer warp, as the library)
    using T = BwdTraitsFor<bf16, 128, false, true, true, true, false, /*kDvEarly=*/true>;
    using TCausal = BwdTraitsFor<bf16, 128, true, true, true, true, false, /*kDvEarly=*/true>;
    if (p.deterministic) return run_bwd<bf16, 128>(p, s);
    return run_bwd_pass<T>(p, s, [&]() -> Status {
      return p.causal ? launch_bwd_kernel<TCausal, true>(p, s) : launch_bwd_kernel<T, true>(p, s);
    });
  }
  if (variant == 15) {  // d128 causal default mode: longest sweeps first
    using TCausal = BwdTraitsFor<bf16, 128, true, true, true, true, false, false, /*kCausalLpt=*/true>;
    if (p.deterministic || !p.causal) return run_bwd<bf16, 128>(p, s);
    return run_bwd_pass<TCausal>(p, s, [&]() -> Status { return launch_bwd_kernel<TCausal, true>(p, s); });
  }
  return Status::NotSupported("no such variant");
}

}  // namespace flashcore::cuda::sm90
