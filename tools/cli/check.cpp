// The comparison behind --check; check.h states the bound.
#include "check.h"

#include <algorithm>
#include <cmath>

#include "flashcore/reference.h"
#include "varlen.h"

namespace flashcore::cli {
namespace {

double epsilon(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return std::ldexp(1.0, -10);
    case DType::kBFloat16: return std::ldexp(1.0, -7);
    case DType::kFloat32: return std::ldexp(1.0, -13);
    case DType::kInt32: return 0.0;  // no attention values are int32
  }
  return 0.0;
}

constexpr double kOutFactor = 4.0;
constexpr double kGradFactor = 8.0;
const double kLseEpsilon = std::ldexp(1.0, -13);

// Errors of `got` against `ref`. Equal infinities (a -inf LSE on a row that sees no key) match.
TensorCheck compare(const std::string& name, const std::vector<double>& got, const std::vector<double>& ref) {
  TensorCheck c;
  c.name = name;
  double diff_sq = 0.0;
  double ref_sq = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double x = i < got.size() ? got[i] : std::nan("");
    const double r = ref[i];
    if (std::isfinite(r)) c.max_abs_ref = std::max(c.max_abs_ref, std::fabs(r));
    if (x == r) {  // exact, including matching infinities
      if (std::isfinite(r)) ref_sq += r * r;
      continue;
    }
    if (!std::isfinite(x) || !std::isfinite(r)) {
      ++c.nonfinite;
      c.max_abs_error = INFINITY;
      continue;
    }
    const double e = std::fabs(x - r);
    c.max_abs_error = std::max(c.max_abs_error, e);
    diff_sq += e * e;
    ref_sq += r * r;
  }
  c.rel_error = ref_sq > 0.0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
  return c;
}

void finish(TensorCheck* c, double bound) {
  c->bound = bound;
  c->passed = c->nonfinite == 0 && c->max_abs_error <= bound;
}

}  // namespace

Status reference_outputs(const Shape& shape, const HostInputs& in, int threads, HostOutputs* ref) {
  const ReferenceProblem whole = reference_problem(shape, in, softmax_scale(shape));
  const bool backward = !in.dout.empty();
  ref->out.assign(in.q.size(), 0.0);
  ref->lse.assign(static_cast<std::size_t>(shape.lse_elements()), 0.0);
  if (backward) {
    ref->dq.assign(in.q.size(), 0.0);
    ref->dk.assign(in.k.size(), 0.0);
    ref->dv.assign(in.v.size(), 0.0);
  }
  if (!shape.varlen()) {
    FLASHCORE_RETURN_IF_ERROR(reference_forward(whole, in.q.data(), in.k.data(), in.v.data(), ref->out.data(),
                                                ref->lse.data(), threads));
    if (!backward) return Status::Ok();
    return reference_backward(whole, in.q.data(), in.k.data(), in.v.data(), in.dout.data(), ref->dq.data(),
                              ref->dk.data(), ref->dv.data(), threads);
  }
  // Varlen: each sequence alone as a dense batch of 1, packed back. Rows of a sequence without
  // keys keep out 0 (and gradients 0) with LSE -inf, as attention.h states.
  const std::int64_t q_width = shape.heads_q * shape.head_dim;
  const std::int64_t kv_width = shape.heads_kv * shape.head_dim;
  for (const Sequence& seq : sequences(shape)) {
    if (seq.len_q == 0) continue;
    if (seq.len_k == 0) {
      put_lse(std::vector<double>(static_cast<std::size_t>(shape.heads_q * seq.len_q), -INFINITY), seq,
              shape.heads_q, shape.total_q(), &ref->lse);
      continue;
    }
    const ReferenceProblem p = sequence_problem(whole, seq, in);
    const std::vector<double> q = take_rows(in.q, seq.q_row, seq.len_q, q_width);
    const std::vector<double> k = take_rows(in.k, seq.k_row, seq.len_k, kv_width);
    const std::vector<double> v = take_rows(in.v, seq.k_row, seq.len_k, kv_width);
    std::vector<double> out(q.size()), lse(static_cast<std::size_t>(shape.heads_q * seq.len_q));
    FLASHCORE_RETURN_IF_ERROR(reference_forward(p, q.data(), k.data(), v.data(), out.data(), lse.data(), threads));
    put_rows(out, seq.q_row, q_width, &ref->out);
    put_lse(lse, seq, shape.heads_q, shape.total_q(), &ref->lse);
    if (!backward) continue;
    const std::vector<double> dout = take_rows(in.dout, seq.q_row, seq.len_q, q_width);
    std::vector<double> dq(q.size()), dk(k.size()), dv(v.size());
    FLASHCORE_RETURN_IF_ERROR(
        reference_backward(p, q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(), dv.data(), threads));
    put_rows(dq, seq.q_row, q_width, &ref->dq);
    put_rows(dk, seq.k_row, kv_width, &ref->dk);
    put_rows(dv, seq.k_row, kv_width, &ref->dv);
  }
  return Status::Ok();
}

CheckResult check_outputs(const HostOutputs& got, const HostOutputs& ref, DType element) {
  CheckResult result;
  const double eps = epsilon(element);
  const std::string eps_text = element == DType::kFloat32 ? "2^-13 (float32 output)"
                                                          : std::string("eps(") + dtype_name(element) + ")";
  result.rule = "fixed bound: max|err| <= k * " + eps_text + " * max|ref|, k = 4 (out), 8 (dq, dk, dv); "
                "lse: 2^-13 * max(1, max|ref|)";

  TensorCheck out = compare("out", got.out, ref.out);
  finish(&out, kOutFactor * eps * out.max_abs_ref);
  result.tensors.push_back(out);

  TensorCheck lse = compare("lse", got.lse, ref.lse);
  finish(&lse, kLseEpsilon * std::max(1.0, lse.max_abs_ref));
  result.tensors.push_back(lse);

  struct Gradient {
    const char* name;
    const std::vector<double>& got;
    const std::vector<double>& ref;
  };
  for (const Gradient& g : {Gradient{"dq", got.dq, ref.dq}, Gradient{"dk", got.dk, ref.dk},
                            Gradient{"dv", got.dv, ref.dv}}) {
    if (g.ref.empty()) continue;
    TensorCheck c = compare(g.name, g.got, g.ref);
    finish(&c, kGradFactor * eps * c.max_abs_ref);
    result.tensors.push_back(c);
  }

  result.passed = std::all_of(result.tensors.begin(), result.tensors.end(),
                              [](const TensorCheck& c) { return c.passed; });
  return result;
}

}  // namespace flashcore::cli
