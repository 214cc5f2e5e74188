// The validated description of one attention call, shared by every backend.
#pragma once

#include <cstdint>

#include "flashcore/attention.h"

namespace flashcore::detail {

struct AttentionProblem {
  std::int64_t batch = 0;
  std::int64_t seqlen_q = 0;
  std::int64_t seqlen_k = 0;
  std::int64_t heads_q = 0;
  std::int64_t heads_kv = 0;
  std::int64_t head_dim = 0;
  DType dtype = DType::kFloat16;
  Device device = Device::kCPU;
  Backend backend = Backend::kAuto;  // resolved: never kAuto after validation
  KernelFamily kernels = KernelFamily::kAuto;  // as requested (the CUDA dispatch resolves kAuto)
  float softmax_scale = 0.0f;        // resolved: the default already applied
  bool causal = false;

  std::int64_t group_size() const { return heads_q / heads_kv; }  // query heads per kv head
};

// Check every argument and fill `problem`. On failure nothing else has happened and the message
// names the offending argument.
Status validate_forward(const ForwardParams& params, AttentionProblem* problem);
Status validate_backward(const BackwardParams& params, AttentionProblem* problem);

}  // namespace flashcore::detail
