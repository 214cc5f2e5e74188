// The float64 reference behind tensor views: gathers the strided fp16/bf16 inputs into contiguous
// float64, runs reference.cpp's arithmetic, and (for Backend::kCpuReference) rounds the results
// into the caller's output views.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/element.h"
#include "cpu/reference.h"

namespace flashcore::cpu {
namespace {

using std::int64_t;

// A rank-4 view's values in contiguous (d0, d1, d2, d3) order.
std::vector<double> gather(const TensorView& t) {
  std::vector<double> values(static_cast<size_t>(t.numel()));
  dispatch_element(t.dtype, [&](auto tag) {
    using Element = decltype(tag);
    double* dst = values.data();
    for (int64_t i0 = 0; i0 < t.shape[0]; ++i0)
      for (int64_t i1 = 0; i1 < t.shape[1]; ++i1)
        for (int64_t i2 = 0; i2 < t.shape[2]; ++i2) {
          const Element* row = row_ptr<Element>(t, i0, i1, i2);
          for (int64_t d = 0; d < t.shape[3]; ++d) *dst++ = static_cast<double>(static_cast<float>(row[d]));
        }
  });
  return values;
}

// x rounded to float with round-to-odd (truncate, then set the last bit if inexact). A second
// rounding to fp16/bf16, which keep 13 or 16 fewer mantissa bits, then equals rounding x directly:
// plain double -> float -> fp16 can land on an fp16 tie and round the wrong way.
float round_to_odd_float(double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) == x || std::isnan(x)) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof(bits));
  bits |= 1u;
  std::memcpy(&f, &bits, sizeof(bits));
  return f;
}

// The inverse of gather, rounding each value to the view's dtype.
void scatter(const std::vector<double>& values, const TensorView& t) {
  dispatch_element(t.dtype, [&](auto tag) {
    using Element = decltype(tag);
    const double* src = values.data();
    for (int64_t i0 = 0; i0 < t.shape[0]; ++i0)
      for (int64_t i1 = 0; i1 < t.shape[1]; ++i1)
        for (int64_t i2 = 0; i2 < t.shape[2]; ++i2) {
          Element* row = row_ptr<Element>(t, i0, i1, i2);
          for (int64_t d = 0; d < t.shape[3]; ++d) {
            if constexpr (std::is_same_v<Element, float>) {
              row[d] = static_cast<float>(*src++);  // one rounding, to nearest
            } else {
              row[d] = static_cast<Element>(round_to_odd_float(*src++));
            }
          }
        }
  });
}

void scatter_lse(const std::vector<double>& values, const TensorView& lse) {
  const double* src = values.data();
  for (int64_t b = 0; b < lse.shape[0]; ++b)
    for (int64_t h = 0; h < lse.shape[1]; ++h)
      for (int64_t i = 0; i < lse.shape[2]; ++i) lse_at(lse, b, h, i) = static_cast<float>(*src++);
}

// The problem's ALiBi slopes (a host float32 view) as contiguous (batch, heads_q) float64; empty
// when the problem has none.
std::vector<double> alibi_slopes_f64(const detail::AttentionProblem& p) {
  std::vector<double> slopes;
  if (p.alibi_slopes == nullptr) return slopes;
  slopes.resize(static_cast<size_t>(p.batch * p.heads_q));
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads_q; ++h)
      slopes[static_cast<size_t>(b * p.heads_q + h)] = p.alibi_slopes[b * p.alibi_batch_stride + h];
  return slopes;
}

const double* data_or_null(const std::vector<double>& values) { return values.empty() ? nullptr : values.data(); }

Status out_of_memory(const char* function) {
  return Status::Internal(std::string(function) + ": out of host memory for the float64 reference");
}

}  // namespace

Status reference_forward_f64(const ForwardParams& params, const detail::AttentionProblem& problem,
                             std::vector<double>* out, std::vector<double>* lse) {
  if (out == nullptr || lse == nullptr) return Status::InvalidArgument("reference_forward_f64: out or lse is null");
  try {
    const std::vector<double> q = gather(params.q);
    const std::vector<double> k = gather(params.k);
    const std::vector<double> v = gather(params.v);
    out->assign(q.size(), 0.0);
    lse->assign(static_cast<size_t>(problem.batch * problem.heads_q * problem.seqlen_q), 0.0);
    const std::vector<double> slopes = alibi_slopes_f64(problem);
    reference_attention_forward(problem, q.data(), k.data(), v.data(), out->data(), lse->data(), params.num_threads,
                                data_or_null(slopes));
  } catch (const std::bad_alloc&) {
    return out_of_memory("reference_forward_f64");
  }
  return Status::Ok();
}

Status reference_backward_f64(const BackwardParams& params, const detail::AttentionProblem& problem,
                              std::vector<double>* dq, std::vector<double>* dk, std::vector<double>* dv) {
  if (dq == nullptr || dk == nullptr || dv == nullptr) {
    return Status::InvalidArgument("reference_backward_f64: dq, dk or dv is null");
  }
  try {
    const std::vector<double> q = gather(params.q);
    const std::vector<double> k = gather(params.k);
    const std::vector<double> v = gather(params.v);
    const std::vector<double> dout = gather(params.dout);
    dq->assign(q.size(), 0.0);
    dk->assign(k.size(), 0.0);
    dv->assign(v.size(), 0.0);
    const std::vector<double> slopes = alibi_slopes_f64(problem);
    reference_attention_backward(problem, q.data(), k.data(), v.data(), dout.data(), dq->data(), dk->data(), dv->data(),
                                 params.num_threads, data_or_null(slopes));
  } catch (const std::bad_alloc&) {
    return out_of_memory("reference_backward_f64");
  }
  return Status::Ok();
}

Status reference_forward(const ForwardParams& params, const detail::AttentionProblem& problem) {
  std::vector<double> out;
  std::vector<double> lse;
  const Status status = reference_forward_f64(params, problem, &out, &lse);
  if (!status.ok()) return status;
  scatter(out, params.out);
  if (params.lse.present()) scatter_lse(lse, params.lse);
  return Status::Ok();
}

Status reference_backward(const BackwardParams& params, const detail::AttentionProblem& problem) {
  std::vector<double> dq;
  std::vector<double> dk;
  std::vector<double> dv;
  const Status status = reference_backward_f64(params, problem, &dq, &dk, &dv);
  if (!status.ok()) return status;
  scatter(dq, params.dq);
  scatter(dk, params.dk);
  scatter(dv, params.dv);
  return Status::Ok();
}

}  // namespace flashcore::cpu
