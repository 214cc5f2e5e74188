// Dev only: A/B variants of the sm90 backward for the harness (capi.cu dispatches kernel_dim
// 1000 + v). Variant 7: bf16 d256 with GQA groups split over a cluster; variant 8: bf16 d256
// deterministic mode by rounds of single-block launches (both device run 8). (Variants 1-3 were
// measured in device runs 1-2; variant 4, the d64 64 x 128 tile, in run 3 and dropped from this
// file in session 9 (git history has it); variants 5-6, the overlapped consumer schedule, in run
// 3: dev/sm90_bwd/variant_overlap.patch; docs/tuning/backward_sm90.md.)
#include "cuda/sm90/bwd_launch_template.h"

namespace flashcore::cuda::sm90 {

Status run_bwd_variant(int variant, const BwdParams& p, cudaStream_t s) {
  using bf16 = cutlass::bfloat16_t;
  if (variant == 7) {  // d256 with the GQA cluster split (bwd_swapkv_cluster_reduce.h), session 9
    return run_bwd_swapkv_with<bf16, 256, /*kAllowKvSplit=*/true, /*kDeterministicRounds=*/false>(p, s);
  }
  if (variant == 8) {  // d256, deterministic mode as rounds of single-block launches, session 9
    return run_bwd_swapkv_with<bf16, 256, false, true>(p, s);
  }
  return Status::NotSupported("no such variant");
}

}  // namespace flashcore::cuda::sm90
