#include "main_like.h"
#include "variants.h"

// s8 A/B: the non-causal d128 and d256 tiles of the library (v7b) in clusters of 2 CTAs sharing
// each K/V tile by TMA multicast (Traits::kClusterM = 2). Non-causal only (the A/B's cells).
using namespace flashcore::cuda::sm90;

flashcore::Status run_variant_s8_d128_bf16_cluster(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  using E = cutlass::bfloat16_t;
  if (p.causal) return flashcore::Status::NotSupported("variant: non-causal only");
  if (p.seqlen_k <= kShortKeysMax) return launch_fwd<FwdTraits<E, 128, 128, 128, 2, false, true, 2, 0, 2>>(p, s);
  return launch_fwd<FwdTraits<E, 128, 128, 176, 2, false, true, 1, 0, 2>>(p, s);
}

flashcore::Status run_variant_s8_d256_bf16_cluster(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  using E = cutlass::bfloat16_t;
  if (p.causal) return flashcore::Status::NotSupported("variant: non-causal only");
  return launch_fwd<FwdTraits<E, 256, 128, 80, 2, false, true, 1, 0, 2>>(p, s);
}
