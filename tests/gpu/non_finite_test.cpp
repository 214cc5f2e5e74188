// NaN and infinities in q, k or v on the CUDA kernels: the cases of tests/common/non_finite_cases.h
// (the same ones the CPU backend passes), fp16 and bf16, on each kernel family the device runs.
#include <cuda_runtime.h>

#include <string>

#include <gtest/gtest.h>

#include "common/non_finite_cases.h"
#include "device_tensors.h"

namespace flashcore::testing {
namespace {

// The forward on `family`, then the backward on the same family where it has one (a family
// without a backward for this problem answers NotSupported, and the automatic choice runs it).
template <KernelFamily family>
void run_cuda(AttentionTensors& t) {
  DeviceAttentionTensors dev(t);
  dev.poison_outputs();
  ForwardParams fwd = dev.forward_params();
  fwd.kernels = family;
  const Status f = forward(fwd);
  ASSERT_TRUE(f.ok()) << f.message();
  BackwardParams bwd = dev.backward_params();
  bwd.kernels = family;
  Status b = backward(bwd);
  if (b.code() == StatusCode::kNotSupported) {
    bwd.kernels = KernelFamily::kAuto;
    b = backward(bwd);
  }
  ASSERT_TRUE(b.ok()) << b.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  t.poison_forward_outputs();
  t.poison_backward_outputs();
  dev.download_forward_outputs(t);
  dev.download_backward_outputs(t);
}

std::string sm90_unavailable() {
  if (std::string why = gpu_unavailable_reason(); !why.empty()) return why;
  int device = 0, major = 0, minor = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (major * 10 + minor != 90) return "the sm90 kernels need compute capability 9.0";
  return "";
}

INSTANTIATE_TEST_SUITE_P(
    Cuda, NonFinite,
    ::testing::Values(NonFiniteParam{"sm80", DType::kFloat16, run_cuda<KernelFamily::kSm80>, gpu_unavailable_reason},
                      NonFiniteParam{"sm80", DType::kBFloat16, run_cuda<KernelFamily::kSm80>, gpu_unavailable_reason},
                      NonFiniteParam{"sm90", DType::kFloat16, run_cuda<KernelFamily::kSm90>, sm90_unavailable},
                      NonFiniteParam{"sm90", DType::kBFloat16, run_cuda<KernelFamily::kSm90>, sm90_unavailable}),
    [](const ::testing::TestParamInfo<NonFiniteParam>& param) {
      return std::string(param.param.name) + (param.param.dtype == DType::kFloat16 ? "_fp16" : "_bf16");
    });

}  // namespace
}  // namespace flashcore::testing
