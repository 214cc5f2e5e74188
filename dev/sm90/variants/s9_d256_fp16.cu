#include "main_like.h"
#include "variants.h"

// s9 A/B: the library's d256 tile (128 x 80, 2 stages, ping-pong, one Q buffer) with the next
// tile's Q prefetched into L2 during this one (Traits::kPrefetchNextQ), causal and not.
using namespace flashcore::cuda::sm90;

flashcore::Status run_variant_s9_d256_fp16_prefetch(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  using E = cutlass::half_t;
  return p.causal ? launch_like_main<FwdTraits<E, 256, 128, 80, 2, true, true, 1, 0, 1, true>>(p, s)
                  : launch_like_main<FwdTraits<E, 256, 128, 80, 2, false, true, 1, 0, 1, true>>(p, s);
}
