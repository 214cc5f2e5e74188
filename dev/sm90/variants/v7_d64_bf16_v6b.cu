#include "main_like.h"
#include "variants.h"

// v7 A/B: bf16 d64 as v6b shipped it (every exponential on MUFU).
flashcore::Status run_variant_v7_d64_bf16_v6b(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  return run_d64_variant<cutlass::bfloat16_t, 192, 128, 2, 2, 0>(p, s);
}
