#include "main_like.h"
#include "variants.h"

// s9 second A/B: bf16 d256, the library's tile as shipped before s9 (no Q prefetch): the baseline
// for variant 20 in a harness of variants only. Causal through the zig-zag grid only (<= 64 m_blocks).
using namespace flashcore::cuda::sm90;

flashcore::Status run_variant_s9_d256_bf16_base(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  using E = cutlass::bfloat16_t;
  if (p.causal) {
    if ((p.seqlen_q + 127) / 128 > 64) return flashcore::Status::NotSupported("variant: causal up to 64 m_blocks");
    return launch_fwd<FwdTraits<E, 256, 128, 80, 2, true, true, 1, 0, 1, false>, true, FwdZigZagScheduler>(p, s);
  }
  return launch_fwd<FwdTraits<E, 256, 128, 80, 2, false, true, 1, 0, 1, false>>(p, s);
}
