#include "main_like.h"
#include "s10_timeline.h"
#include "variants.h"

// v11 (session 10, issue 14): O through the tile's Q buffer and TMA stores (fwd_epilogue.h's smem
// path, Traits::kStoreOViaSmem). 31/32: the library's bf16 d128 (short keys) / d256 non-causal
// tiles with it, %globaltimer-stamped like 26/27 (their direct-store twins); 33: bf16 d128 causal
// (the library's tile, one Q buffer + prefetch) with it, launched as the library launches the main
// tile (causal only; the A/B's baseline is the library).
using namespace flashcore::cuda::sm90;

flashcore::Status run_variant_v11_d128_bf16_timed_tma(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  if (p.causal) return flashcore::Status::NotSupported("timeline: non-causal only");
  return fc_dev_timeline::launch_timed<FwdTraits<cutlass::bfloat16_t, 128, 128, 128, 2, false, true, 2, 0, 1, false, true>>(p, s);
}

flashcore::Status run_variant_v11_d256_bf16_timed_tma(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  if (p.causal) return flashcore::Status::NotSupported("timeline: non-causal only");
  return fc_dev_timeline::launch_timed<FwdTraits<cutlass::bfloat16_t, 256, 128, 80, 2, false, true, 1, 0, 1, true, true>>(p, s);
}

flashcore::Status run_variant_v11_d128_bf16_causal_tma(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  if (!p.causal) return flashcore::Status::NotSupported("variant 33: causal only");
  return launch_like_main<FwdTraits<cutlass::bfloat16_t, 128, 128, 128, 3, true, true, 1, 0, 1, true, true>>(p, s);
}
