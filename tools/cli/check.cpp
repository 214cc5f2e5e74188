// The comparison behind --check; check.h states the bound.
#include "check.h"

#include <algorithm>
#include <cmath>

#include "flashcore/reference.h"

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

ReferenceProblem reference_problem(const Shape& s, const HostInputs& in) {
  ReferenceProblem p;
  p.batch = s.batch;
  p.seqlen_q = s.seqlen_q;
  p.seqlen_k = s.seqlen_k;
  p.heads_q = s.heads_q;
  p.heads_kv = s.heads_kv;
  p.head_dim = s.head_dim;
  p.causal = s.causal;
  p.softmax_scale = softmax_scale(s);
  p.window_left = s.window_left;
  p.window_right = s.window_right;
  p.softcap = static_cast<double>(static_cast<float>(s.softcap));  // the float the library is given
  p.dropout_p = static_cast<double>(static_cast<float>(s.dropout_p));
  p.dropout_seed = s.dropout_seed;
  if (!in.alibi_slopes.empty()) {
    p.alibi_slopes = in.alibi_slopes.data();
    p.alibi_slopes_per_batch = true;
  }
  return p;
}

}  // namespace

Status reference_outputs(const Shape& shape, const HostInputs& in, int threads, HostOutputs* ref) {
  const ReferenceProblem p = reference_problem(shape, in);
  ref->out.resize(in.q.size());
  ref->lse.resize(static_cast<std::size_t>(shape.lse_elements()));
  FLASHCORE_RETURN_IF_ERROR(reference_forward(p, in.q.data(), in.k.data(), in.v.data(), ref->out.data(),
                                              ref->lse.data(), threads));
  if (!in.dout.empty()) {
    ref->dq.resize(in.q.size());
    ref->dk.resize(in.k.size());
    ref->dv.resize(in.v.size());
    FLASHCORE_RETURN_IF_ERROR(reference_backward(p, in.q.data(), in.k.data(), in.v.data(), in.dout.data(),
                                                 ref->dq.data(), ref->dk.data(), ref->dv.data(), threads));
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
