#include "cuda/sm90/fwd_launch.h"
#include "main_like.h"
#include "variants.h"

// v13 A/B: the library's bf16 d256 tile (128 x 80, 2 stages, ping-pong, one Q buffer, next Q
// prefetched) with 16-byte O stores instead of the library's 8, causal and not, launched as the
// library launches it. 0 spills since v12's epilogue refactor (v11 saw 24-48 B). 36: the library's
// own bf16 d256 entry (fwd_sm90_bf16_hdim256.cu, linked beside), for a harness whose library part
// is fp16 only (no kernel compiled here).
using namespace flashcore::cuda::sm90;

flashcore::Status run_variant_v13_d256_bf16_16b(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  using E = cutlass::bfloat16_t;
  return p.causal ? launch_like_main<FwdTraits<E, 256, 128, 80, 2, true, true, 1, 0, 1, true, 16>>(p, s)
                  : launch_like_main<FwdTraits<E, 256, 128, 80, 2, false, true, 1, 0, 1, true, 16>>(p, s);
}

// Defined in fwd_sm90_bf16_hdim256.cu: not instantiated again here.
namespace flashcore::cuda::sm90 {
extern template Status run_fwd<cutlass::bfloat16_t, 256>(const FwdParams& params, cudaStream_t stream);
}

flashcore::Status run_variant_v13_lib_d256_bf16(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  return run_fwd<cutlass::bfloat16_t, 256>(p, s);
}
