#include "cuda/sm90/fwd_launch_template.h"
#include "variants.h"

using namespace flashcore::cuda::sm90;
using E = cutlass::bfloat16_t;

flashcore::Status run_variant_d128_causal_persistent(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  return p.causal ? launch_fwd<FwdTraits<E, 128, 128, 128, 2, true, true>, true>(p, s)
                  : launch_fwd<FwdTraits<E, 128, 128, 128, 2, false, true>>(p, s);
}
