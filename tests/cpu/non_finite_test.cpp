// NaN and infinities in q, k or v on the CPU flash backend: the cases of
// tests/common/non_finite_cases.h, fp16 and bf16.
#include <string>

#include <gtest/gtest.h>

#include "common/non_finite_cases.h"

namespace flashcore::testing {
namespace {

void run_cpu(AttentionTensors& t) {
  const Status fwd = forward(t.forward_params(Backend::kCpu));
  ASSERT_TRUE(fwd.ok()) << fwd.message();
  const Status bwd = backward(t.backward_params(Backend::kCpu));
  ASSERT_TRUE(bwd.ok()) << bwd.message();
}

INSTANTIATE_TEST_SUITE_P(Cpu, NonFinite,
                         ::testing::Values(NonFiniteParam{"cpu", DType::kFloat16, run_cpu},
                                           NonFiniteParam{"cpu", DType::kBFloat16, run_cpu},
                                           NonFiniteParam{"cpu", DType::kFloat32, run_cpu}),
                         [](const ::testing::TestParamInfo<NonFiniteParam>& param) {
                           return std::string(param.param.dtype == DType::kFloat16    ? "fp16"
                                              : param.param.dtype == DType::kBFloat16 ? "bf16"
                                                                                      : "fp32");
                         });

}  // namespace
}  // namespace flashcore::testing
