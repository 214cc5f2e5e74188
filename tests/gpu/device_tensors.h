// Device copies of host test tensors (tests/common/host_tensor.h) with the same strides, so a GPU
// run sees exactly the layout the host tensor describes (padding, packed-qkv slices) and its
// results land back in the host tensor for the float64 comparisons.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "common/attention_tensors.h"
#include "common/host_tensor.h"
#include "flashcore/tensor.h"

namespace flashcore::testing {

// Skip the calling test, with the reason, when no CUDA device can run it. Use as
//   if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
std::string gpu_unavailable_reason();

// True, with a note on stdout, when `status` says this run has no kernel for the case's dtype and
// head dim: FLASHCORE_KERNELS forces a family without one, or the build was trimmed
// (FLASHCORE_HEAD_DIMS / FLASHCORE_DTYPES). The case belongs to another run or build; every other
// status (an option refused, a launch error) stays the caller's failure.
bool run_lacks_kernel(const Status& status, const std::string& case_name);

// The device bytes spanned by one host view: from its first element to its last. Slices of one
// packed host buffer get separate device copies of their spans; strides are preserved.
class DeviceMirror {
 public:
  explicit DeviceMirror(const HostTensor& host);
  ~DeviceMirror();
  DeviceMirror(const DeviceMirror&) = delete;
  DeviceMirror& operator=(const DeviceMirror&) = delete;

  TensorView view() const;          // the host view's shape and strides over device memory
  void upload(const HostTensor& host);
  void poison();                    // NaN (0xFF bytes) over the whole span
  void download_into(HostTensor& host) const;  // only the view's elements are written back

 private:
  TensorView host_view_;
  std::int64_t span_elements_ = 0;
  void* device_ = nullptr;
};

// Device mirrors of every tensor of an AttentionTensors, inputs uploaded, outputs poisoned. Its
// params are the host tensors' params (causal, scale) with every view moved to the device.
struct DeviceAttentionTensors {
  explicit DeviceAttentionTensors(const AttentionTensors& host);
  ~DeviceAttentionTensors();
  DeviceAttentionTensors(const DeviceAttentionTensors&) = delete;
  DeviceAttentionTensors& operator=(const DeviceAttentionTensors&) = delete;
  ForwardParams forward_params() const;
  BackwardParams backward_params() const;
  void poison_outputs();
  void download_forward_outputs(AttentionTensors& host) const;   // out, lse
  void download_backward_outputs(AttentionTensors& host) const;  // dq, dk, dv

  DeviceMirror q, k, v, dout, out, lse, dq, dk, dv;

 private:
  ForwardParams host_forward_;
  BackwardParams host_backward_;
  void* alibi_ = nullptr;  // device copy of the host's ALiBi slopes, if any
  TensorView alibi_view_;
};

}  // namespace flashcore::testing
