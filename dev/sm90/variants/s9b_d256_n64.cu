#include "main_like.h"
#include "variants.h"

// s9 second A/B: bf16 d256 with 64-key blocks (128 x 64, 2 stages, 64 + 2 x (32 + 32) = 192 KB,
// ping-pong, next Q prefetched into L2): no ragged last key block at 2k/4k (80-key blocks compute
// 2080 keys for 2048, 1.6 % of the tile's MMA work; Nsight Compute had the d256 tile's SM-active
// cycles 2.1 % above cuDNN's 128-key kernel). Causal through the zig-zag grid only.
using namespace flashcore::cuda::sm90;

flashcore::Status run_variant_s9_d256_bf16_n64(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  using E = cutlass::bfloat16_t;
  if (p.causal) {
    if ((p.seqlen_q + 127) / 128 > 64) return flashcore::Status::NotSupported("variant: causal up to 64 m_blocks");
    return launch_fwd<FwdTraits<E, 256, 128, 64, 2, true, true, 1, 0, 1, true>, true, FwdZigZagScheduler>(p, s);
  }
  return launch_fwd<FwdTraits<E, 256, 128, 64, 2, false, true, 1, 0, 1, true>>(p, s);
}
