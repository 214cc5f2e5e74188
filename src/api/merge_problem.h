// The validated description of one merge_partials() call (flashcore/merge.h).
#pragma once

#include <cstdint>

#include "flashcore/merge.h"

namespace flashcore::detail {

struct MergeProblem {
  std::int64_t batch = 0;
  std::int64_t seqlen = 0;
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;
  Device device = Device::kCPU;
  Backend backend = Backend::kAuto;  // resolved: kCpu or kCuda
};

// Check every argument and fill `problem`; on failure the message names the argument.
Status validate_merge(const MergeParams& params, MergeProblem* problem);

}  // namespace flashcore::detail
