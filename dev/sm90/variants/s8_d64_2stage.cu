#include "main_like.h"
#include "variants.h"

// s8 A/B: bf16 d64 as v7b shipped it (192 x 128, 2 K/V stages), against v8's 3-stage build (measured
// ahead; the library is back at 2 stages, so this is now the library's own tile).
flashcore::Status run_variant_s8_d64_bf16_2st(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  return run_d64_variant<cutlass::bfloat16_t, 192, 128, 2, 2, 0>(p, s);
}
