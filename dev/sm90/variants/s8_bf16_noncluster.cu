#include "main_like.h"
#include "variants.h"

// s8 A/B baseline: the non-causal d128 and d256 tiles as v7b shipped them (no cluster), against
// the library's clusters of 2 sharing K/V by multicast. Non-causal only (the A/B's cells).
using namespace flashcore::cuda::sm90;

flashcore::Status run_variant_s8_d128_bf16_noncluster(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  using E = cutlass::bfloat16_t;
  if (p.causal) return flashcore::Status::NotSupported("variant: non-causal only");
  if (p.seqlen_k <= kShortKeysMax) return launch_fwd<FwdTraits<E, 128, 128, 128, 2, false, true, 2, 0, 1>>(p, s);
  return launch_fwd<FwdTraits<E, 128, 128, 176, 2, false, true, 1, 0, 1>>(p, s);
}

flashcore::Status run_variant_s8_d256_bf16_noncluster(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  using E = cutlass::bfloat16_t;
  if (p.causal) return flashcore::Status::NotSupported("variant: non-causal only");
  return launch_fwd<FwdTraits<E, 256, 128, 80, 2, false, true, 1, 0, 1>>(p, s);
}
