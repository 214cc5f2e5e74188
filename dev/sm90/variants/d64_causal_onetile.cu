#include "cuda/sm90/fwd_launch_template.h"
#include "variants.h"

using namespace flashcore::cuda::sm90;
using E = cutlass::bfloat16_t;

// v6 A/B: d64 causal with one tile per CTA (the main table's tile: two Q buffers, bottom-aligned
// grid) instead of the zig-zag persistent grid; non-causal as main.
flashcore::Status run_variant_d64_causal_onetile(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  return p.causal ? launch_fwd<FwdTraitsFor<E, 64, true>>(p, s) : run_fwd<E, 64>(p, s);
}
