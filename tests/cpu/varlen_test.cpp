// Variable-length batches on the CPU backend: packed sequences of different lengths (empty ones
// too), alone and with causal, GQA, the window, softcap and ALiBi, forward (out and LSE) and
// backward against the float64 reference run sequence by sequence, under FlashAttention's rule;
// and the validation of cu_seqlens / max_seqlen.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/host_tensor.h"
#include "common/varlen_tensors.h"
#include "flashcore/accuracy.h"
#include "flashcore/attention.h"

namespace flashcore::testing {
namespace {

using namespace flashcore::accuracy;

class Varlen : public ::testing::TestWithParam<VarlenCase> {};

TEST_P(Varlen, ForwardAndBackwardMatchThePerSequenceReference) {
  VarlenTensors t(GetParam(), DType::kBFloat16);
  Status status = forward(t.forward_params(Backend::kCpu));
  ASSERT_TRUE(status.ok()) << status.message();
  status = backward(t.backward_params(Backend::kCpu));
  ASSERT_TRUE(status.ok()) << status.message();
  for (const Comparison& cmp : t.check()) EXPECT_TRUE(cmp.ok) << cmp.message;
}

INSTANTIATE_TEST_SUITE_P(Cpu, Varlen, ::testing::ValuesIn(varlen_cases()),
                         [](const ::testing::TestParamInfo<VarlenCase>& param_info) { return std::string(param_info.param.name); });

// ---- validation ----

struct VarlenArgs {
  HostTensor q{DType::kFloat16, {20, 2, 32}}, out{DType::kFloat16, {20, 2, 32}};
  std::vector<std::int32_t> cu_q{0, 10, 15, 20}, cu_k{0, 10, 15, 20};

  ForwardParams params(std::int64_t max_q = 10, std::int64_t max_k = 10) {
    ForwardParams p;
    p.q = p.k = p.v = q.view();
    p.out = out.view();
    p.cu_seqlens_q = make_view(cu_q.data(), DType::kInt32, Device::kCPU, {static_cast<std::int64_t>(cu_q.size())});
    p.cu_seqlens_k = make_view(cu_k.data(), DType::kInt32, Device::kCPU, {static_cast<std::int64_t>(cu_k.size())});
    p.max_seqlen_q = max_q, p.max_seqlen_k = max_k;
    return p;
  }
};

void expect_rejected(const ForwardParams& p, const std::string& text) {
  const Status status = forward(p);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find(text), std::string::npos) << status.message();
}

TEST(VarlenValidation, BadOffsetsAndBoundsNameTheArgument) {
  VarlenArgs a;
  ASSERT_TRUE(forward(a.params()).ok());
  a.cu_q = {0, 10, 5, 20};
  expect_rejected(a.params(), "cu_seqlens_q: must not decrease");
  a.cu_q = {1, 10, 15, 20};
  expect_rejected(a.params(), "cu_seqlens_q: must start at 0");
  a.cu_q = {0, 10, 15, 19};
  expect_rejected(a.params(), "cu_seqlens_q: must end at q's total_q (20)");
  a.cu_q = {0, 10, 15, 20};
  expect_rejected(a.params(6), "cu_seqlens_q: sequence 0 has length 10, above max_seqlen_q (6)");
  expect_rejected(a.params(0), "max_seqlen_q: must be at least 1");
  a.cu_k = {0, 20};
  expect_rejected(a.params(), "cu_seqlens_k: expected shape (4)");
  a.cu_k = {0, 10, 15, 20};
  ForwardParams p = a.params();
  p.cu_seqlens_k = TensorView{};
  expect_rejected(p, "cu_seqlens_k: is null but cu_seqlens_q is given");
  p = a.params();
  p.cu_seqlens_q.dtype = DType::kFloat32;
  expect_rejected(p, "cu_seqlens_q: expected dtype int32");
  HostTensor dense(DType::kFloat16, {1, 20, 2, 32});
  p = a.params();
  p.q = dense.view();
  expect_rejected(p, "q: expected rank 3 (total_q, heads_q, head_dim)");
  HostTensor lse(DType::kFloat32, {1, 2, 20});
  p = a.params();
  p.lse = lse.view();
  expect_rejected(p, "lse: expected rank 2 (heads_q, total_q)");
}

}  // namespace
}  // namespace flashcore::testing
