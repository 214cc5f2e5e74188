#include "main_like.h"
#include "variants.h"

// v12 A/B: bf16 d128 as the library launched it before v12 (4-byte O stores), causal and not:
// causal the 128 x 128 3-stage tile with the next Q prefetched; non-causal up to kShortKeysMax
// keys the short-keys tile (128 x 128, 2 stages, two Q buffers), past it the main 128 x 176.
using namespace flashcore::cuda::sm90;

flashcore::Status run_variant_v12_d128_bf16_4b(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  using E = cutlass::bfloat16_t;
  if (p.causal) return launch_like_main<FwdTraits<E, 128, 128, 128, 3, true, true, 1, 0, 1, true>>(p, s);
  if (p.seqlen_k <= kShortKeysMax) return launch_fwd<FwdTraits<E, 128, 128, 128, 2, false, true, 2>>(p, s);
  return launch_fwd<FwdTraits<E, 128, 128, 176, 2, false, true>>(p, s);
}
