#include "main_like.h"
#include "variants.h"

// v7 A/B: bf16 d64, 1 exponential in 4 on the FMA pipe (the library: 1 in 8).
flashcore::Status run_variant_v7_d64_bf16_exp4(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  return run_d64_variant<cutlass::bfloat16_t, 192, 128, 2, 2, 4>(p, s);
}
