#include "main_like.h"
#include "variants.h"

// s10: bf16 d128 non-causal as the library launches it up to 4k keys (the short-keys tile), the
// uninstrumented twin of the timed variant 26.
using namespace flashcore::cuda::sm90;

flashcore::Status run_variant_s10_d128_bf16_plain(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  if (p.causal) return flashcore::Status::NotSupported("variant: non-causal only");
  return launch_fwd<FwdTraits<cutlass::bfloat16_t, 128, 128, 128, 2, false, true, 2>>(p, s);
}
