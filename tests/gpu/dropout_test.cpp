// Dropout in the CUDA kernels (the sm80 family's score-option kernels, the sm90 forward's option
// kernels at d <= 128; kernels=auto falls back to sm80 where a newer family lacks dropout; with
// FLASHCORE_KERNELS=sm90 a case sm90 cannot serve fails naming kernels): forward and backward against the float64 reference given the
// same Philox stream (attention.h, "dropout"), alone and with causal, GQA, the window, softcap,
// ALiBi and ragged sizes, under FlashAttention's rule; a forced family without dropout is refused
// naming dropout_p. Outputs are NaN-poisoned on the device before every run.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "api/problem.h"
#include "common/reference_check.h"
#include "common/attention_tensors.h"
#include "common/reference_problem.h"
#include "cpu/reference.h"
#include "cuda/device.h"
#include "cuda/dispatch.h"
#include "device_tensors.h"
#include "flashcore/accuracy.h"
#include "flashcore/attention.h"

namespace flashcore::testing {
namespace {

using namespace flashcore::accuracy;

struct DropoutCase {
  const char* name;
  AttentionShape shape;  // batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal
  Layout layout;
  float dropout_p;
  std::int64_t window_left = -1;
  float softcap = 0.0f;
  bool alibi = false;
};

const std::vector<DropoutCase>& dropout_cases() {
  static const std::vector<DropoutCase> cases = {
      {"p10_d64", {2, 1000, 1000, 2, 2, 64, false}, Layout::kContiguous, 0.1f},
      {"p10_d128", {1, 1024, 1024, 4, 4, 128, false}, Layout::kContiguous, 0.1f},
      {"p30_causal_gqa_d128", {1, 777, 900, 8, 2, 128, true}, Layout::kPaddedAligned, 0.3f},
      {"p50_q_longer_d64", {2, 333, 129, 2, 1, 64, false}, Layout::kContiguous, 0.5f},
      {"p20_all_options_d128", {2, 700, 650, 4, 2, 128, true}, Layout::kContiguous, 0.2f, 200, 3.0f, true},
      {"p15_all_options_d64", {1, 1000, 1100, 4, 2, 64, false}, Layout::kPaddedAligned, 0.15f, 300, 1.5f, true},
      {"p90_d64_small", {1, 70, 90, 2, 2, 64, true}, Layout::kContiguous, 0.9f},
      {"p10_d96", {1, 300, 400, 2, 2, 96, false}, Layout::kContiguous, 0.1f},
      {"p10_d256", {1, 300, 257, 2, 1, 256, true}, Layout::kContiguous, 0.1f},
      {"p10_d40_staged", {1, 300, 257, 3, 1, 40, false}, Layout::kContiguous, 0.1f},
  };
  return cases;
}

using DropoutParam = std::tuple<DropoutCase, DType>;

std::string param_name(const ::testing::TestParamInfo<DropoutParam>& info) {
  return std::string(std::get<0>(info.param).name) + (std::get<1>(info.param) == DType::kFloat16 ? "_fp16" : "_bf16");
}

AttentionTensors make_tensors(const DropoutParam& param) {
  const auto& [c, dtype] = param;
  AttentionTensors t(c.shape, dtype, c.layout, 0xd20f + static_cast<std::uint64_t>(c.shape.seqlen_q) * 31 +
                                                   static_cast<std::uint64_t>(dtype));
  t.options.dropout_p = c.dropout_p;
  t.options.dropout_seed = 0x243f6a8885a308d3ull + static_cast<std::uint64_t>(c.shape.head_dim);
  t.options.dropout_offset = 41;
  t.options.window_left = c.window_left;
  t.options.softcap = c.softcap;
  if (c.alibi) {
    t.options.alibi_per_batch = true;
    t.options.alibi_slopes = random_alibi_slopes(c.shape.batch * c.shape.heads_q, 3);
  }
  return t;
}

class CudaDropout : public ::testing::TestWithParam<DropoutParam> {};

TEST_P(CudaDropout, ForwardMatchesReferenceWithinTwiceTheSamePrecisionError) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  AttentionTensors t = make_tensors(GetParam());
  DeviceAttentionTensors dev(t);
  dev.poison_outputs();
  const Status status = forward(dev.forward_params());
  if (run_lacks_kernel(status, ::testing::UnitTest::GetInstance()->current_test_info()->name())) GTEST_SKIP() << status.message();
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  t.poison_forward_outputs();
  dev.download_forward_outputs(t);

  for (const Comparison& c : compare_forward_to_reference(t)) EXPECT_TRUE(c.ok) << c.message;
}

TEST_P(CudaDropout, BackwardMatchesReferenceWithinThriceTheSamePrecisionError) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  AttentionTensors t = make_tensors(GetParam());
  // The forward's out and lse from the float64 reference (rounded), so this checks the backward alone.
  ASSERT_TRUE(forward(t.forward_params(Backend::kCpuReference)).ok());
  DeviceAttentionTensors dev(t);
  dev.out.upload(t.out);
  dev.lse.upload(t.lse);
  for (DeviceMirror* m : {&dev.dq, &dev.dk, &dev.dv}) m->poison();
  const Status status = backward(dev.backward_params());
  if (run_lacks_kernel(status, ::testing::UnitTest::GetInstance()->current_test_info()->name())) GTEST_SKIP() << status.message();
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  t.poison_backward_outputs();
  dev.download_backward_outputs(t);

  for (const Comparison& c : compare_backward_to_reference(t)) EXPECT_TRUE(c.ok) << c.message;
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaDropout,
                         ::testing::Combine(::testing::ValuesIn(dropout_cases()),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16)),
                         param_name);

// Whether this build holds a `pass` row of `family` with dropout for bf16 at d128 that the current
// device can run (generate.py: sm80 everywhere; sm90 the forward's option kernels and, where built,
// the backward's dropout kernels).
bool family_serves_dropout(KernelFamily family, bool backward_pass) {
  cuda::DeviceInfo device;
  if (!cuda::current_device("test", &device).ok()) return false;
  const cuda::CompiledKernels kernels = cuda::compiled_kernels();
  auto serves = [&](const auto& row) {
    return row.family == family && row.dtype == DType::kBFloat16 && row.head_dim >= 128 &&
           (row.options & cuda::KernelOption::kDropout) != 0 && device.compute_capability >= row.min_cc &&
           device.compute_capability <= row.max_cc;
  };
  if (backward_pass) {
    for (std::size_t i = 0; i < kernels.backward_count; ++i) {
      if (serves(kernels.backward[i])) return true;
    }
  } else {
    for (std::size_t i = 0; i < kernels.forward_count; ++i) {
      if (serves(kernels.forward[i])) return true;
    }
  }
  return false;
}

// Dropout is dispatch data, per pass: kernels=auto runs the newest family with a row that has it
// (on an H100 the sm90 forward's option kernels, and the sm90 backward where its dropout kernels
// are built; else sm80), a forced family without it is refused with kNotSupported naming kernels,
// never run without it.
TEST(CudaDropoutDispatch, AutoPicksAFamilyWithDropoutPerPassAndAForcedFamilyWithoutItIsRefused) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  AttentionTensors t({1, 256, 256, 2, 2, 128, true}, DType::kBFloat16, Layout::kContiguous, 33);
  t.options.dropout_p = 0.1f;
  DeviceAttentionTensors dev(t);
  const bool sm90_forward = family_serves_dropout(KernelFamily::kSm90, false);
  const bool sm90_backward = family_serves_dropout(KernelFamily::kSm90, true);
  ForwardParams params = dev.forward_params();
  KernelFamily family = KernelFamily::kAuto;
  ASSERT_TRUE(selected_kernels(params, &family).ok());
  EXPECT_EQ(family, sm90_forward ? KernelFamily::kSm90 : KernelFamily::kSm80);
  EXPECT_TRUE(forward(params).ok());
  params.kernels = KernelFamily::kSm90;
  const Status status = forward(params);
  if (sm90_forward) {
    EXPECT_TRUE(status.ok()) << status.message();
  } else {
    EXPECT_EQ(status.code(), StatusCode::kNotSupported);
    EXPECT_NE(status.message().find("kernels: "), std::string::npos) << status.message();
  }
  BackwardParams bwd = dev.backward_params();
  KernelFamily bwd_family = KernelFamily::kAuto;
  ASSERT_TRUE(selected_kernels(bwd, &bwd_family).ok());
  EXPECT_EQ(bwd_family, sm90_backward ? KernelFamily::kSm90 : KernelFamily::kSm80);
  bwd.kernels = KernelFamily::kSm90;
  const Status bwd_status = backward(bwd);
  if (sm90_backward) {
    EXPECT_TRUE(bwd_status.ok()) << bwd_status.message();
  } else {
    EXPECT_EQ(bwd_status.code(), StatusCode::kNotSupported);
    EXPECT_NE(bwd_status.message().find("kernels: "), std::string::npos) << bwd_status.message();
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace flashcore::testing
