#include "cuda/sm90/fwd_launch_template.h"
#include "variants.h"

using namespace flashcore::cuda::sm90;
using E = cutlass::bfloat16_t;

// Causal with the persistent zig-zag scheduler, on the main tile table; non-causal as main.
flashcore::Status run_variant_zigzag_d128(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  return p.causal ? launch_fwd<FwdTraitsFor<E, 128, true>, true, FwdZigZagScheduler>(p, s)
                  : launch_fwd<FwdTraitsFor<E, 128, false>>(p, s);
}
