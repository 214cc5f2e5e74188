// Dev only: A/B variants of the sm90 backward for the harness (capi.cu dispatches kernel_dim
// 1000 + v; fc_sm90_bwd_variant_dim gives each variant's head dim). None is open now: add the next
// one here as `if (variant == N)` with its traits.
// Earlier: variants 1-3 measured in device runs 1-2; variant 4 (the d64 64 x 128 tile) in run 3,
// dropped from this file in session 9 (git history has it); variants 5-6 (the overlapped consumer
// schedule) in run 3: dev/sm90_bwd/variant_overlap.patch; variants 8 and 9 (run 8's rounds without
// the split; the d256 path before run 8) and 10-11 (the dQ writer warp and the per-warp adds, runs
// 10-11) dropped in session 11 (git history has them); d128 variants 12 (dV issued before the dPᵀ
// wait) and 15 (causal CTAs longest first) of run 12, rejected: dev/sm90_bwd/variant_run12.patch
// (docs/tuning/backward_sm90.md, run 12); d256 variants 12 and 14 of d256 run 1 (dQᵀ last, with and
// without the causal order; the library has dQᵀ first and the order since that run):
// dev/sm90_bwd/variant_d256_dqlast.patch (session 12, review finding F9); d256 variants 20 and 21 of
// d256 run 4 (session 12: the query heads swept inner, rejected): dev/sm90_bwd/variant_d256_sweep.patch;
// 16-18 (bf16, session 12's device run 13: 16 the dQ writer at d64, rejected; 17 the writer at d96
// and 18 the causal d128 tail longest-first, both the library's since): git history has them.
#include "cuda/sm90/bwd_launch_template.h"

namespace flashcore::cuda::sm90 {

Status run_bwd_variant(int variant, const BwdParams& p, cudaStream_t s) {
  (void)variant;
  (void)p;
  (void)s;
  return Status::NotSupported("no such variant");
}

}  // namespace flashcore::cuda::sm90
