// flashcore/reference.h: checks the problem, then runs the CPU float64 reference (cpu/reference.h).
#include "flashcore/reference.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "api/problem.h"
#include "cpu/reference.h"

namespace flashcore {
namespace {

Status to_problem(const char* function, const ReferenceProblem& r, detail::AttentionProblem* p) {
  const auto fail = [&](const char* name, const std::string& what) {
    return Status::InvalidArgument(std::string(function) + ": " + name + ": " + what);
  };
  if (r.batch < 1 || r.seqlen_q < 1 || r.seqlen_k < 1 || r.heads_q < 1 || r.heads_kv < 1 || r.head_dim < 1) {
    return fail("problem", "batch, seqlens, heads and head_dim must all be at least 1");
  }
  if (r.heads_q % r.heads_kv != 0) return fail("problem", "heads_q must be a multiple of heads_kv");
  if (!std::isfinite(r.softmax_scale)) return fail("problem", "softmax_scale must be finite");
  p->batch = r.batch;
  p->seqlen_q = r.seqlen_q;
  p->seqlen_k = r.seqlen_k;
  p->heads_q = r.heads_q;
  p->heads_kv = r.heads_kv;
  p->head_dim = r.head_dim;
  p->softmax_scale = static_cast<float>(r.softmax_scale);
  p->causal = r.causal;
  p->backend = Backend::kCpuReference;
  if (r.window_left < -1) return fail("window_left", "must be -1 (unbounded) or at least 0");
  if (r.window_right < -1) return fail("window_right", "must be -1 (unbounded) or at least 0");
  if (!std::isfinite(r.softcap) || r.softcap < 0.0) return fail("softcap", "must be a finite number >= 0 (0 = off)");
  p->window_left = r.window_left;  // the reference applies the rule as given: no normalisation
  p->window_right = r.window_right;
  p->softcap = static_cast<float>(r.softcap);
  if (!std::isfinite(r.dropout_p) || r.dropout_p < 0.0 || r.dropout_p >= 1.0) {
    return fail("dropout_p", "must be in [0, 1) (0 = off)");
  }
  p->dropout_p = static_cast<float>(r.dropout_p);
  p->dropout_seed = r.dropout_seed;
  p->dropout_offset = r.dropout_offset;
  p->dropout_batch0 = r.dropout_first_batch;
  return Status::Ok();
}

// ReferenceProblem's slopes as the (batch, heads_q) array the reference reads; empty for none.
std::vector<double> expand_slopes(const ReferenceProblem& r) {
  std::vector<double> slopes;
  if (r.alibi_slopes == nullptr) return slopes;
  slopes.resize(static_cast<size_t>(r.batch * r.heads_q));
  for (std::int64_t b = 0; b < r.batch; ++b)
    for (std::int64_t h = 0; h < r.heads_q; ++h)
      slopes[static_cast<size_t>(b * r.heads_q + h)] = r.alibi_slopes[(r.alibi_slopes_per_batch ? b * r.heads_q : 0) + h];
  return slopes;
}

Status check_pointers(const char* function, std::initializer_list<std::pair<const char*, const void*>> pointers) {
  for (const auto& [name, pointer] : pointers) {
    if (pointer == nullptr) return Status::InvalidArgument(std::string(function) + ": " + name + ": is null");
  }
  return Status::Ok();
}

}  // namespace

Status reference_forward(const ReferenceProblem& problem, const double* q, const double* k, const double* v,
                         double* out, double* lse, int num_threads) {
  constexpr const char* kFn = "flashcore::reference_forward";
  detail::AttentionProblem p;
  FLASHCORE_RETURN_IF_ERROR(to_problem(kFn, problem, &p));
  FLASHCORE_RETURN_IF_ERROR(check_pointers(kFn, {{"q", q}, {"k", k}, {"v", v}, {"out", out}, {"lse", lse}}));
  const std::vector<double> slopes = expand_slopes(problem);
  cpu::reference_attention_forward(p, q, k, v, out, lse, num_threads, slopes.empty() ? nullptr : slopes.data());
  return Status::Ok();
}

Status reference_backward(const ReferenceProblem& problem, const double* q, const double* k, const double* v,
                          const double* dout, double* dq, double* dk, double* dv, int num_threads) {
  constexpr const char* kFn = "flashcore::reference_backward";
  detail::AttentionProblem p;
  FLASHCORE_RETURN_IF_ERROR(to_problem(kFn, problem, &p));
  FLASHCORE_RETURN_IF_ERROR(
      check_pointers(kFn, {{"q", q}, {"k", k}, {"v", v}, {"dout", dout}, {"dq", dq}, {"dk", dk}, {"dv", dv}}));
  const std::vector<double> slopes = expand_slopes(problem);
  cpu::reference_attention_backward(p, q, k, v, dout, dq, dk, dv, num_threads,
                                    slopes.empty() ? nullptr : slopes.data());
  return Status::Ok();
}

}  // namespace flashcore
