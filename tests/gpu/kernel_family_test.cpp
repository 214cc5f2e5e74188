// Which kernel family runs (flashcore::KernelFamily): kAuto takes sm90 on compute capability 9.0
// where that family serves the head dim and falls back to sm80 elsewhere; a forced family that
// cannot serve the call fails with kNotSupported naming `kernels`; FLASHCORE_KERNELS forces a
// family when the field is kAuto. The forced families are checked against the reference too.
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "common/attention_tensors.h"
#include "device_tensors.h"
#include "flashcore/attention.h"

namespace flashcore::testing {
namespace {

int compute_capability() {
  int device = 0, major = 0, minor = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  return major * 10 + minor;
}

// Sets FLASHCORE_KERNELS for the scope (the tests run in one process, one at a time).
class ScopedKernelsEnv {
 public:
  explicit ScopedKernelsEnv(const char* value) {
    if (const char* old = std::getenv("FLASHCORE_KERNELS")) saved_ = old, had_ = true;
    setenv("FLASHCORE_KERNELS", value, 1);
  }
  ~ScopedKernelsEnv() {
    if (had_) {
      setenv("FLASHCORE_KERNELS", saved_.c_str(), 1);
    } else {
      unsetenv("FLASHCORE_KERNELS");
    }
  }

 private:
  std::string saved_;
  bool had_ = false;
};

template <class Params>
KernelFamily selected(const Params& params) {
  KernelFamily family = KernelFamily::kAuto;
  const Status status = selected_kernels(params, &family);
  EXPECT_TRUE(status.ok()) << status.message();
  return family;
}

TEST(KernelFamily, ForcedSm80RunsOnEveryGpu) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  ScopedKernelsEnv env("auto");
  AttentionTensors t({1, 100, 130, 4, 2, 64, true}, DType::kBFloat16, Layout::kContiguous, 21);
  DeviceAttentionTensors dev(t);
  ForwardParams params = dev.forward_params();
  params.kernels = KernelFamily::kSm80;
  EXPECT_EQ(selected(params), KernelFamily::kSm80);
  const Status status = forward(params);
  EXPECT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// On compute capability 9.0 the sm90 family serves every forward and backward head dim up to 256
// (d32 by its d64 kernel, the extra columns zero; the backward at d192 by its d256 kernel) when the
// build has the d256 kernels; else the backward at d256 falls back to sm80.
TEST(KernelFamily, AutoPrefersSm90OnHopperAndFallsBackToSm80) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  ScopedKernelsEnv env("auto");
  AttentionTensors d128({1, 64, 64, 2, 2, 128, false}, DType::kFloat16, Layout::kContiguous, 22);
  AttentionTensors d32({1, 64, 64, 2, 2, 32, false}, DType::kFloat16, Layout::kContiguous, 23);
  AttentionTensors d256({1, 64, 64, 2, 2, 256, false}, DType::kFloat16, Layout::kContiguous, 26);
  DeviceAttentionTensors dev128(d128), dev32(d32), dev256(d256);
  const KernelFamily family128 = selected(dev128.forward_params());
  if (compute_capability() == 90 && family128 != KernelFamily::kSm90) {
    GTEST_SKIP() << "this build has no sm90 forward kernels (FLASHCORE_KERNEL_FAMILIES)";
  }
  const KernelFamily newest = compute_capability() == 90 ? KernelFamily::kSm90 : KernelFamily::kSm80;
  EXPECT_EQ(family128, newest);
  EXPECT_EQ(selected(dev32.forward_params()), newest);
  EXPECT_EQ(selected(dev128.backward_params()), newest);
  EXPECT_EQ(selected(dev32.backward_params()), newest);
  // FLASHCORE_HEAD_DIMS trims both passes alike: an sm90 forward at d256 means an sm90 backward too.
  const KernelFamily newest256 = selected(dev256.forward_params());
  EXPECT_EQ(selected(dev256.backward_params()), newest256);
}

TEST(KernelFamily, ForcedSm90RefusesWhatItCannotServe) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  ScopedKernelsEnv env("auto");
  AttentionTensors t({1, 64, 64, 2, 2, 256, false}, DType::kFloat16, Layout::kContiguous, 24);
  DeviceAttentionTensors dev(t);
  BackwardParams params = dev.backward_params();  // the sm90 backward serves no sliding window at d256
  params.window_left = 16;
  params.kernels = KernelFamily::kSm90;
  const Status status = backward(params);
  EXPECT_EQ(status.code(), StatusCode::kNotSupported);
  EXPECT_NE(status.message().find("kernels: "), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("sm90"), std::string::npos) << status.message();
}

TEST(KernelFamily, EnvironmentForcesAFamilyWhenTheFieldIsAuto) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  AttentionTensors t({1, 64, 64, 2, 2, 128, false}, DType::kFloat16, Layout::kContiguous, 25);
  DeviceAttentionTensors dev(t);
  {
    ScopedKernelsEnv env("sm80");
    EXPECT_EQ(selected(dev.forward_params()), KernelFamily::kSm80);
  }
  {
    ScopedKernelsEnv env("sm42");
    KernelFamily family = KernelFamily::kAuto;
    const Status status = selected_kernels(dev.forward_params(), &family);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("kernels: the environment variable FLASHCORE_KERNELS is 'sm42'"),
              std::string::npos)
        << status.message();
  }
}

}  // namespace
}  // namespace flashcore::testing
