#include "main_like.h"
#include "variants.h"

// s9 A/B, d128 with the next tile's Q prefetched into L2 (Traits::kPrefetchNextQ): non-causal up
// to 4k keys 128 x 128 with 3 K/V stages and one Q buffer (224 KB) in place of the short-keys
// tile's 2 stages and two Q buffers; past 4k the main 128 x 176 tile; causal the library's
// 128 x 128 3-stage tile.
using namespace flashcore::cuda::sm90;

flashcore::Status run_variant_s9_d128_bf16_prefetch(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  using E = cutlass::bfloat16_t;
  if (p.causal) return launch_like_main<FwdTraits<E, 128, 128, 128, 3, true, true, 1, 0, 1, true>>(p, s);
  if (p.seqlen_k <= kShortKeysMax) return launch_fwd<FwdTraits<E, 128, 128, 128, 3, false, true, 1, 0, 1, true>>(p, s);
  return launch_fwd<FwdTraits<E, 128, 128, 176, 2, false, true, 1, 0, 1, true>>(p, s);
}
