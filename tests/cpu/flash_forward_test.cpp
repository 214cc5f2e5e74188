// CPU flash forward against the float64 reference, under FlashAttention's tolerance rule.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "accuracy_cases.h"
#include "api/problem.h"
#include "common/reference_problem.h"
#include "flashcore/accuracy.h"
#include "cpu/reference.h"
#include "flashcore/attention.h"

namespace flashcore::testing {
namespace {

using namespace flashcore::accuracy;  // the accuracy rule and baseline, shared with `flashcore fuzz`

class FlashForward : public ::testing::TestWithParam<AccuracyParam> {};

TEST_P(FlashForward, MatchesReferenceWithinTwiceTheSamePrecisionError) {
  const auto& [c, dtype] = GetParam();
  AttentionTensors t(c.shape, dtype, c.layout, case_seed(GetParam()));
  t.softmax_scale = c.softmax_scale;
  const ForwardParams params = t.forward_params(Backend::kCpu);
  const Status status = forward(params);
  ASSERT_TRUE(status.ok()) << status.message();

  detail::AttentionProblem problem;
  ASSERT_TRUE(detail::validate_forward(params, &problem).ok());
  std::vector<double> ref_out, ref_lse;
  ASSERT_TRUE(cpu::reference_forward_f64(params, problem, &ref_out, &ref_lse).ok());
  const BaselineForward base = baseline_forward(reference_problem(problem), problem.dtype,
                                                t.q.values(), t.k.values(), t.v.values());

  const Comparison out = compare_to_reference("out", dtype, 2.0, t.out.values(), base.out, ref_out);
  RecordProperty("out", out.message);
  EXPECT_TRUE(out.ok) << out.message;
  const Comparison lse = compare_to_reference("lse", DType::kFloat32, 2.0, t.lse.values(), base.lse, ref_lse);
  RecordProperty("lse", lse.message);
  EXPECT_TRUE(lse.ok) << lse.message;
  EXPECT_TRUE(t.out.outside_view_untouched()) << "out: written outside its view";
  EXPECT_TRUE(t.lse.outside_view_untouched()) << "lse: written outside its view";
}

// FlashAttention's convention for a row that sees no key: output exactly 0, LSE -inf.
TEST(FlashForwardRowsWithoutKeys, GiveZeroOutputAndMinusInfinityLse) {
  int cases_with_empty_rows = 0;
  for (const AccuracyCase& c : accuracy_cases()) {
    if (!row_sees_no_key(c.shape, 0)) continue;
    ++cases_with_empty_rows;
    for (const DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
      AttentionTensors t(c.shape, dtype, c.layout, case_seed({c, dtype}));
      const Status status = forward(t.forward_params(Backend::kCpu));
      ASSERT_TRUE(status.ok()) << status.message();
      const AttentionShape& s = c.shape;
      for (std::int64_t b = 0; b < s.batch; ++b)
        for (std::int64_t h = 0; h < s.heads_q; ++h)
          for (std::int64_t i = 0; row_sees_no_key(s, i); ++i) {
            const double lse = t.lse.get((b * s.heads_q + h) * s.seqlen_q + i);
            ASSERT_TRUE(std::isinf(lse) && lse < 0) << c.name << ": lse[" << b << "," << h << "," << i << "] = " << lse;
            for (std::int64_t d = 0; d < s.head_dim; ++d) {
              const double o = t.out.get(((b * s.seqlen_q + i) * s.heads_q + h) * s.head_dim + d);
              ASSERT_EQ(o, 0.0) << c.name << ": out[" << b << "," << i << "," << h << "," << d << "]";
            }
          }
    }
  }
  EXPECT_GE(cases_with_empty_rows, 2) << "the shape grid lost its causal seqlen_q > seqlen_k cases";
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashForward, accuracy_params(), accuracy_param_name);

}  // namespace
}  // namespace flashcore::testing
