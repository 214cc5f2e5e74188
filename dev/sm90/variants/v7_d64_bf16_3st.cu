#include "main_like.h"
#include "variants.h"

// v7 A/B: bf16 d64 192 x 128 with 3 K/V stages (2 x 24 + 3 x 32 = 144 KB), 1 exponential in 8 on the FMA pipe.
flashcore::Status run_variant_v7_d64_bf16_3st(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  return run_d64_variant<cutlass::bfloat16_t, 192, 128, 3, 2, 8>(p, s);
}
