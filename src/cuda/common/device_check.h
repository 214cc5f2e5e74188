// Checks shared by the CUDA entry points: a usable device of compute capability >= 8.0, and
// tensors whose pointers really are device memory (a host pointer tagged Device::kCUDA would
// otherwise fault inside a kernel).
#pragma once

#include <initializer_list>
#include <utility>

#include "api/problem.h"

namespace flashcore::cuda {

struct NamedTensor {
  const char* name;
  const TensorView* tensor;
};

// The current device's compute capability as major*10+minor, after checking it is >= 80.
Status check_device(const char* function, int* compute_capability);

// Each present tensor's pointer must be device-accessible memory on the current device.
Status check_device_pointers(const char* function, std::initializer_list<NamedTensor> tensors);

}  // namespace flashcore::cuda
