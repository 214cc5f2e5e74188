#include "main_like.h"
#include "variants.h"

// v7 A/B: bf16 d64 128 x 128 (two consumer warpgroups), two Q buffers, 1 exponential in 8 on the FMA pipe.
flashcore::Status run_variant_v7_d64_bf16_128(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  return run_d64_variant<cutlass::bfloat16_t, 128, 128, 2, 2, 8>(p, s);
}
