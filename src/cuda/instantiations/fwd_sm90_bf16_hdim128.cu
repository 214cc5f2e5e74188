// Written by hand until generate.py learns the sm90 family; built for sm_90a only.
#include "cuda/sm90/fwd_launch_template.h"

namespace flashcore::cuda::sm90 {
template Status run_fwd<cutlass::bfloat16_t, 128>(const FwdParams& params, cudaStream_t stream);
}  // namespace flashcore::cuda::sm90
