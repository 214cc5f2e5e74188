#include "cuda/sm90/fwd_launch_template.h"
#include "variants.h"

using namespace flashcore::cuda::sm90;
using E = cutlass::bfloat16_t;

flashcore::Status run_variant_d256_pp(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  return p.causal ? launch_fwd<FwdTraits<E, 256, 128, 80, 2, true, true>>(p, s)
                  : launch_fwd<FwdTraits<E, 256, 128, 80, 2, false, true>>(p, s);
}
