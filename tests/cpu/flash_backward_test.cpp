// CPU flash backward against the float64 reference's exact gradients, under FlashAttention's
// tolerance rule (3x the same-precision implementation's error for gradients). As in
// FlashAttention's tests, the backward consumes the flash forward's own out and LSE.
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

class FlashBackward : public ::testing::TestWithParam<AccuracyParam> {};

TEST_P(FlashBackward, MatchesReferenceWithinThriceTheSamePrecisionError) {
  const auto& [c, dtype] = GetParam();
  AttentionTensors t(c.shape, dtype, c.layout, case_seed(GetParam()));
  t.softmax_scale = c.softmax_scale;
  Status status = forward(t.forward_params(Backend::kCpu));
  ASSERT_TRUE(status.ok()) << status.message();
  const BackwardParams params = t.backward_params(Backend::kCpu);
  status = backward(params);
  ASSERT_TRUE(status.ok()) << status.message();

  detail::AttentionProblem problem;
  ASSERT_TRUE(detail::validate_backward(params, &problem).ok());
  std::vector<double> ref_dq, ref_dk, ref_dv;
  ASSERT_TRUE(cpu::reference_backward_f64(params, problem, &ref_dq, &ref_dk, &ref_dv).ok());
  const BaselineBackward base = baseline_backward(reference_problem(problem), problem.dtype,
                                                  t.q.values(), t.k.values(), t.v.values(), t.dout.values());

  const Comparison dq = compare_to_reference("dq", dtype, 3.0, t.dq.values(), base.dq, ref_dq);
  RecordProperty("dq", dq.message);
  EXPECT_TRUE(dq.ok) << dq.message;
  const Comparison dk = compare_to_reference("dk", dtype, 3.0, t.dk.values(), base.dk, ref_dk);
  RecordProperty("dk", dk.message);
  EXPECT_TRUE(dk.ok) << dk.message;
  const Comparison dv = compare_to_reference("dv", dtype, 3.0, t.dv.values(), base.dv, ref_dv);
  RecordProperty("dv", dv.message);
  EXPECT_TRUE(dv.ok) << dv.message;
  if (t.outputs_own_storage) {
    EXPECT_TRUE(t.dq.outside_view_untouched()) << "dq: written outside its view";
    EXPECT_TRUE(t.dk.outside_view_untouched()) << "dk: written outside its view";
    EXPECT_TRUE(t.dv.outside_view_untouched()) << "dv: written outside its view";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashBackward, accuracy_params(), accuracy_param_name);

}  // namespace
}  // namespace flashcore::testing
