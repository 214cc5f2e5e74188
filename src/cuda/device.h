// The device a call runs on: its facts (read from the driver once per device and process) and the
// checks every CUDA entry point makes on the tensors it was handed.
#pragma once

#include <initializer_list>

#include "api/problem.h"
#include "cuda/params.h"

namespace flashcore::cuda {

// The calling thread's current device. Fails, naming `function`, when there is none or its compute
// capability is below 8.0 (the oldest any kernel family serves).
Status current_device(const char* function, DeviceInfo* info);

struct NamedTensor {
  const char* name;
  const TensorView* tensor;
};

// Each present tensor's pointer must be device-accessible memory on `device` (a host pointer tagged
// Device::kCUDA would otherwise fault inside a kernel).
Status check_device_pointers(const char* function, const DeviceInfo& device, std::initializer_list<NamedTensor> tensors);

// 16-byte vector loads and stores (and TMA) need every row of every (batch, head) to start
// 16-byte aligned: the data pointer and the batch, seqlen and head strides. Calls whose tensors
// are not get staged copies (staging.h).
bool rows_aligned(const TensorView& t);

}  // namespace flashcore::cuda
