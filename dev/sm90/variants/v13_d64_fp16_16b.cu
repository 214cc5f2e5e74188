#include "main_like.h"
#include "variants.h"

// v13 A/B: the library's fp16 d64 main tile (192 x 128, three consumer warpgroups, two Q buffers,
// causal zig-zag up to 64 m_blocks) with 16-byte O stores instead of 4 (d64 had no wider-store A/B
// in v12), causal and not, launched as the library launches it. Target: fp16 d64 causal 2k, 0.98x
// cutlass_ex88 / 0.99x cuDNN in v8's grid.
using namespace flashcore::cuda::sm90;

flashcore::Status run_variant_v13_d64_fp16_16b(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  using E = cutlass::half_t;
  return p.causal ? launch_like_main<FwdTraits<E, 64, 192, 128, 2, true, true, 2, 0, 1, false, 16>>(p, s)
                  : launch_like_main<FwdTraits<E, 64, 192, 128, 2, false, true, 2, 0, 1, false, 16>>(p, s);
}
