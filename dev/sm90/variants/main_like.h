// Dev-only: a variant's traits launched the way run_fwd_for_shape launches the main tile (the
// zig-zag persistent grid for causal up to 64 m_blocks, one tile per CTA above; non-causal
// persistent), so an A/B differs from the library only in the traits.
#pragma once

#include "cuda/sm90/fwd_launch_template.h"

template <class Traits>
flashcore::Status launch_like_main(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  using namespace flashcore::cuda::sm90;
  if constexpr (Traits::kIsCausal) {
    const int num_m_blocks = (p.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM;
    if (num_m_blocks <= 64) return launch_fwd<Traits, true, FwdZigZagScheduler>(p, s);
  }
  return launch_fwd<Traits>(p, s);
}

// (dtype, d64), causal and not, with the given tile.
template <class E, int kBlockM, int kBlockN, int kStages, int kQStages, int kExp2FmaEvery>
flashcore::Status run_d64_variant(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  using namespace flashcore::cuda::sm90;
  return p.causal ? launch_like_main<FwdTraits<E, 64, kBlockM, kBlockN, kStages, true, true, kQStages, kExp2FmaEvery>>(p, s)
                  : launch_like_main<FwdTraits<E, 64, kBlockM, kBlockN, kStages, false, true, kQStages, kExp2FmaEvery>>(p, s);
}
