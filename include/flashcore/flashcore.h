// flashcore: exact attention (FlashAttention) for NVIDIA GPUs and the CPU.
#pragma once

#include "flashcore/attention.h"
#include "flashcore/merge.h"
#include "flashcore/kvcache.h"
#include "flashcore/build_info.h"
#include "flashcore/cpu_threads.h"
#include "flashcore/half.h"
#include "flashcore/reference.h"
#include "flashcore/tensor.h"

namespace flashcore {
// Whether this build contains the CUDA backend (it still needs a GPU of compute capability >= 8.0).
bool built_with_cuda();
}  // namespace flashcore
