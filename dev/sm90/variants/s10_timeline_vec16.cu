#include "main_like.h"
#include "s10_epilogue_vec16.h"
#include "s10_timeline.h"
#include "variants.h"

// s10, next step (not yet run on a GPU): variants 26/27 with the 16-byte-store epilogue
// (s10_epilogue_vec16.h), stamped the same way: 29 bf16 d128, 30 bf16 d256, non-causal.
using namespace flashcore::cuda::sm90;

namespace {
// FwdEpilogueVec16 stores whole 16-byte groups: O's base, strides and head_dim in 8 elements.
flashcore::Status vec16_supported(const flashcore::cuda::FwdParams& p) {
  if (p.causal) return flashcore::Status::NotSupported("timeline: non-causal only");
  const bool aligned = reinterpret_cast<uintptr_t>(p.out) % 16 == 0 && p.o_strides.row % 8 == 0 &&
                       p.o_strides.head % 8 == 0 && p.o_strides.batch % 8 == 0 && p.head_dim % 8 == 0;
  return aligned ? flashcore::Status::Ok() : flashcore::Status::NotSupported("vec16 epilogue: O not 16-byte aligned");
}
}  // namespace

flashcore::Status run_variant_s10_d128_bf16_timed_vec16(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  if (flashcore::Status st = vec16_supported(p); !st.ok()) return st;
  using Traits = FwdTraits<cutlass::bfloat16_t, 128, 128, 128, 2, false, true, 2>;
  return fc_dev_timeline::launch_timed<Traits, fc_dev_timeline::FwdEpilogueVec16<Traits>>(p, s);
}

flashcore::Status run_variant_s10_d256_bf16_timed_vec16(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  if (flashcore::Status st = vec16_supported(p); !st.ok()) return st;
  using Traits = FwdTraits<cutlass::bfloat16_t, 256, 128, 80, 2, false, true, 1, 0, 1, true>;
  return fc_dev_timeline::launch_timed<Traits, fc_dev_timeline::FwdEpilogueVec16<Traits>>(p, s);
}
