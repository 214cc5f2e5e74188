#include "common/reference_check.h"

#include "api/problem.h"
#include "common/reference_problem.h"
#include "cpu/reference.h"

namespace flashcore::testing {
namespace {

std::vector<accuracy::Comparison> failed(const std::string& what, const Status& status) {
  accuracy::Comparison c;
  c.message = what + ": " + status.message();
  return {c};
}

}  // namespace

std::vector<accuracy::Comparison> compare_forward_to_reference(const AttentionTensors& t) {
  const ForwardParams params = t.forward_params(Backend::kCpuReference);
  detail::AttentionProblem problem;
  if (Status s = detail::validate_forward(params, &problem); !s.ok()) return failed("validate_forward", s);
  std::vector<double> ref_out, ref_lse, slopes;
  if (Status s = cpu::reference_forward_f64(params, problem, &ref_out, &ref_lse); !s.ok()) {
    return failed("reference_forward_f64", s);
  }
  const accuracy::BaselineForward base = accuracy::baseline_forward(
      reference_problem(problem, &slopes), problem.dtype, t.q.values(), t.k.values(), t.v.values());
  return {accuracy::compare_to_reference("out", t.dtype, 2.0, t.out.values(), base.out, ref_out),
          accuracy::compare_to_reference("lse", DType::kFloat32, 2.0, t.lse.values(), base.lse, ref_lse)};
}

std::vector<accuracy::Comparison> compare_backward_to_reference(const AttentionTensors& t, bool row_sum_allowance) {
  const BackwardParams params = t.backward_params(Backend::kCpuReference);
  detail::AttentionProblem problem;
  if (Status s = detail::validate_backward(params, &problem); !s.ok()) return failed("validate_backward", s);
  std::vector<double> ref_dq, ref_dk, ref_dv, slopes;
  if (Status s = cpu::reference_backward_f64(params, problem, &ref_dq, &ref_dk, &ref_dv); !s.ok()) {
    return failed("reference_backward_f64", s);
  }
  const ReferenceProblem reference = reference_problem(problem, &slopes);
  const accuracy::BaselineBackward base =
      accuracy::baseline_backward(reference, problem.dtype, t.q.values(), t.k.values(), t.v.values(), t.dout.values());
  accuracy::RowSumAllowance extra;
  if (row_sum_allowance) {
    extra = accuracy::row_sum_allowance(reference, problem.dtype, t.q.values(), t.k.values(), t.v.values(),
                                        t.out.values(), t.dout.values());
  }
  return {accuracy::compare_to_reference("dq", t.dtype, 3.0, t.dq.values(), base.dq, ref_dq, extra.dq),
          accuracy::compare_to_reference("dk", t.dtype, 3.0, t.dk.values(), base.dk, ref_dk, extra.dk),
          accuracy::compare_to_reference("dv", t.dtype, 3.0, t.dv.values(), base.dv, ref_dv)};
}

}  // namespace flashcore::testing
