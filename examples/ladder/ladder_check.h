// Argument checks and CUDA error handling shared by the ladder's rungs: every rung rejects bad
// input with a Status naming the argument, and turns CUDA errors into Status values (never aborts).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "ladder.h"

namespace flashcore::ladder {

inline Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::Ok();
  return Status::CudaError(std::string(what) + ": " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

// A kernel launch reports bad configurations (too much shared memory, a grid too large) only
// through cudaGetLastError.
inline Status launch_status(const char* kernel) { return cuda_status(cudaGetLastError(), kernel); }

// Checks the problem's sizes against what `rung` supports. Grid dimensions y and z are limited to
// 65535 blocks, which bounds heads and batch (and their product where a kernel folds them).
inline Status check_problem(const LadderProblem& p, const std::vector<int>& head_dims, const char* rung) {
  const std::string who = std::string("ladder rung '") + rung + "': ";
  if (p.batch < 1 || p.batch > 65535) {
    return Status::InvalidArgument(who + "batch must be in [1, 65535], got " + std::to_string(p.batch));
  }
  if (p.heads < 1 || p.heads > 65535) {
    return Status::InvalidArgument(who + "heads must be in [1, 65535], got " + std::to_string(p.heads));
  }
  if (static_cast<long long>(p.batch) * p.heads > 65535) {
    return Status::InvalidArgument(who + "batch * heads must be at most 65535, got " +
                                   std::to_string(static_cast<long long>(p.batch) * p.heads));
  }
  if (p.seqlen < 1) return Status::InvalidArgument(who + "seqlen must be at least 1, got " + std::to_string(p.seqlen));
  if (!std::isfinite(p.softmax_scale)) return Status::InvalidArgument(who + "softmax_scale must be finite");
  for (int d : head_dims) {
    if (d == p.head_dim) return Status::Ok();
  }
  std::string supported;
  for (int d : head_dims) supported += (supported.empty() ? "" : ", ") + std::to_string(d);
  return Status::NotSupported(who + "head_dim " + std::to_string(p.head_dim) + " is not supported (supported: " +
                              supported + ")");
}

using NamedPointer = std::pair<const void*, const char*>;

inline Status check_pointers(std::initializer_list<NamedPointer> pointers, const char* rung) {
  for (const auto& [ptr, name] : pointers) {
    if (ptr == nullptr) {
      return Status::InvalidArgument(std::string("ladder rung '") + rung + "': " + name + " must not be null");
    }
  }
  return Status::Ok();
}

}  // namespace flashcore::ladder

#define LADDER_RETURN_IF_ERROR(expr)        \
  do {                                      \
    ::flashcore::Status ladder_status_ = (expr); \
    if (!ladder_status_.ok()) return ladder_status_; \
  } while (0)

#define LADDER_CUDA_RETURN_IF_ERROR(expr) LADDER_RETURN_IF_ERROR(::flashcore::ladder::cuda_status((expr), #expr))
