// The same-precision baseline of flashcore/accuracy.h.
#include "flashcore/accuracy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <vector>

#include <cutlass/numeric_types.h>

#include "cpu/parallel_for.h"
#include "flashcore/reference.h"
#include "cpu/reference_dropout.h"

namespace flashcore::accuracy {
namespace {

using std::int64_t;
constexpr float kInf = std::numeric_limits<float>::infinity();

// The problem with what the baseline computes in: its dtype and the scale as the float it is.
struct Problem {
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
  bool causal;
  float softmax_scale;
  DType dtype;
  int64_t window_left, window_right;
  float softcap;
  const double* alibi_slopes;
  bool alibi_per_batch;
  cpu::ReferenceDropout dropout;  // attention.h's keep mask, as the reference draws it
  int64_t group_size() const { return heads_q / heads_kv; }  // query heads per kv head
  float slope(int64_t b, int64_t h) const {
    return alibi_slopes == nullptr ? 0.0f : static_cast<float>(alibi_slopes[(alibi_per_batch ? b * heads_q : 0) + h]);
  }
};

Problem problem_of(const ReferenceProblem& r, DType dtype) {
  cpu::ReferenceDropout dropout;
  dropout.p = static_cast<float>(r.dropout_p);  // the float the API takes
  dropout.seed = r.dropout_seed;
  dropout.offset = r.dropout_offset;
  dropout.heads_q = r.heads_q;
  dropout.batch0 = r.dropout_first_batch;
  return {r.batch,  r.seqlen_q, r.seqlen_k, r.heads_q, r.heads_kv, r.head_dim,
          r.causal, static_cast<float>(r.softmax_scale), dtype, r.window_left, r.window_right,
          static_cast<float>(r.softcap), r.alibi_slopes, r.alibi_slopes_per_batch, dropout};
}

double round_float(DType dtype, float value) {
  switch (dtype) {
    case DType::kFloat16:
      return static_cast<float>(cutlass::half_t(value));
    case DType::kBFloat16:
      return static_cast<float>(cutlass::bfloat16_t(value));
    case DType::kFloat32:
    case DType::kInt32:  // no attention values are int32 (index tensors only)
      return value;
  }
  return value;
}

// Offsets into the contiguous arrays.
struct Layout {
  const Problem& p;
  int64_t q_row(int64_t b, int64_t i, int64_t h) const { return ((b * p.seqlen_q + i) * p.heads_q + h) * p.head_dim; }
  int64_t k_row(int64_t b, int64_t j, int64_t h) const { return ((b * p.seqlen_k + j) * p.heads_kv + h) * p.head_dim; }
};

// An fp32 dot product of two dtype rows, rounded as a half-precision GEMM's output is.
float gemm_dot(DType dtype, const double* a, const double* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t d = 0; d < n; ++d) sum += static_cast<float>(a[d]) * static_cast<float>(b[d]);
  return static_cast<float>(round_float(dtype, sum));
}

// The keys [begin, end) query row i sees (attention.h: causal and the window, bottom-right aligned).
struct KeySpan {
  int64_t begin, end;
  int64_t size() const { return std::max<int64_t>(end - begin, 0); }
};
KeySpan visible_keys(const Problem& p, int64_t i) {
  const int64_t diagonal = i + p.seqlen_k - p.seqlen_q;
  int64_t end = p.seqlen_k;
  if (p.causal) end = std::min(end, diagonal + 1);
  if (p.window_right >= 0) end = std::min(end, diagonal + p.window_right + 1);
  const int64_t begin = p.window_left >= 0 ? std::max<int64_t>(0, diagonal - p.window_left) : 0;
  return {begin, std::max<int64_t>(end, 0)};
}

// One query row's softmax over its rounded scores, in fp32: probs (unrounded) of its visible keys
// and the LSE. Non-finite scores go through the plain formula as in the float64 reference: a NaN
// or +inf score, or all scores -inf, give NaN (std::max alone would skip a NaN).
// probs[e] and dscore[e] are those of key keys.begin + e. The scores get the softcap and ALiBi in
// fp32 (attention.h); dscore is the softcap's 1 - tanh² (1 without).
float row_softmax(const Problem& p, const Layout& at, const std::vector<double>& q,
                  const std::vector<double>& k, int64_t b, int64_t h, int64_t i, KeySpan keys,
                  std::vector<float>& probs, std::vector<float>& dscore) {
  const int64_t visible = keys.size();
  if (visible == 0) return -kInf;
  const int64_t hk = h / p.group_size();
  const float slope = p.slope(b, h);
  float row_max = -kInf;
  for (int64_t e = 0; e < visible; ++e) {
    const int64_t j = keys.begin + e;
    float s = gemm_dot(p.dtype, &q[at.q_row(b, i, h)], &k[at.k_row(b, j, hk)], p.head_dim) * p.softmax_scale;
    dscore[e] = 1.0f;
    if (p.softcap > 0.0f) {  // elementwise in the dtype, each step rounded, as a plain implementation's
      const float t = static_cast<float>(round_float(p.dtype, std::tanh(static_cast<float>(round_float(p.dtype, s / p.softcap)))));
      s = static_cast<float>(round_float(p.dtype, p.softcap * t));
      dscore[e] = 1.0f - t * t;
    }
    s -= slope * static_cast<float>(std::llabs(i + p.seqlen_k - p.seqlen_q - j));
    probs[e] = s;
    if (probs[e] > row_max || std::isnan(probs[e])) row_max = probs[e];
  }
  float sum = 0.0f;
  for (int64_t e = 0; e < visible; ++e) {
    probs[e] = std::exp(probs[e] - row_max);
    sum += probs[e];
  }
  for (int64_t e = 0; e < visible; ++e) probs[e] /= sum;
  return row_max + std::log(sum);
}

}  // namespace

double round_to(DType dtype, double value) { return round_float(dtype, static_cast<float>(value)); }

BaselineForward baseline_forward(const ReferenceProblem& problem, DType dtype, const std::vector<double>& q,
                                 const std::vector<double>& k, const std::vector<double>& v, int num_threads) {
  const Problem p = problem_of(problem, dtype);
  const Layout at{p};
  BaselineForward result;
  result.out.assign(q.size(), 0.0);
  result.lse.assign(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q), 0.0);
  const int64_t tasks = p.batch * p.heads_q;  // one (batch, query head) each: rows are independent
  const int workers = cpu::worker_count(num_threads, tasks);
  std::vector<std::vector<float>> probs_of(static_cast<size_t>(workers), std::vector<float>(p.seqlen_k));
  std::vector<std::vector<float>> out_row_of(static_cast<size_t>(workers), std::vector<float>(p.head_dim));
  std::vector<std::vector<float>> dscore_of(static_cast<size_t>(workers), std::vector<float>(p.seqlen_k));
  cpu::parallel_for(tasks, workers, [&](int64_t task, int worker) {
    const int64_t b = task / p.heads_q;
    const int64_t h = task % p.heads_q;
    const int64_t hk = h / p.group_size();
    std::vector<float>& probs = probs_of[static_cast<size_t>(worker)];
    std::vector<float>& out_row = out_row_of[static_cast<size_t>(worker)];
    std::vector<float>& dscore = dscore_of[static_cast<size_t>(worker)];
    for (int64_t i = 0; i < p.seqlen_q; ++i) {
      const KeySpan keys = visible_keys(p, i);
      result.lse[(b * p.heads_q + h) * p.seqlen_q + i] = row_softmax(p, at, q, k, b, h, i, keys, probs, dscore);
      std::fill(out_row.begin(), out_row.end(), 0.0f);
      for (int64_t e = 0; e < keys.size(); ++e) {
        const float z = static_cast<float>(p.dropout.factor(b, h, i, keys.begin + e));
        const float p16 = static_cast<float>(round_float(p.dtype, probs[e] * z));
        const double* vj = &v[at.k_row(b, keys.begin + e, hk)];
        for (int64_t d = 0; d < p.head_dim; ++d) out_row[d] += p16 * static_cast<float>(vj[d]);
      }
      for (int64_t d = 0; d < p.head_dim; ++d) result.out[at.q_row(b, i, h) + d] = round_float(p.dtype, out_row[d]);
    }
  });
  return result;
}

BaselineBackward baseline_backward(const ReferenceProblem& problem, DType dtype, const std::vector<double>& q,
                                   const std::vector<double>& k, const std::vector<double>& v,
                                   const std::vector<double>& dout, int num_threads) {
  const Problem p = problem_of(problem, dtype);
  const Layout at{p};
  const int64_t head_dim = p.head_dim;
  std::vector<float> dq_acc(q.size(), 0.0f);
  std::vector<float> dk_acc(k.size(), 0.0f);
  std::vector<float> dv_acc(v.size(), 0.0f);
  // dK and dV sum over the query heads sharing a kv head, so a task owns one (batch, kv head) and
  // adds in the same order (query head, then row) whatever the thread count.
  const int64_t tasks = p.batch * p.heads_kv;
  const int workers = cpu::worker_count(num_threads, tasks);
  std::vector<std::vector<float>> probs_of(static_cast<size_t>(workers), std::vector<float>(p.seqlen_k));
  std::vector<std::vector<float>> dprobs_of(static_cast<size_t>(workers), std::vector<float>(p.seqlen_k));
  std::vector<std::vector<float>> dscore_of(static_cast<size_t>(workers), std::vector<float>(p.seqlen_k));
  std::vector<std::vector<float>> out_row_of(static_cast<size_t>(workers), std::vector<float>(head_dim));
  cpu::parallel_for(tasks, workers, [&](int64_t task, int worker) {
    const int64_t b = task / p.heads_kv;
    const int64_t hk = task % p.heads_kv;
    std::vector<float>& probs = probs_of[static_cast<size_t>(worker)];
    std::vector<float>& dprobs = dprobs_of[static_cast<size_t>(worker)];
    std::vector<float>& dscore = dscore_of[static_cast<size_t>(worker)];
    for (int64_t h = hk * p.group_size(); h < (hk + 1) * p.group_size(); ++h) {
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        const KeySpan keys = visible_keys(p, i);
        row_softmax(p, at, q, k, b, h, i, keys, probs, dscore);
        const double* doi = &dout[at.q_row(b, i, h)];
        float p_dot_dp = 0.0f;  // softmax backward in fp32 on the rounded dP
        for (int64_t e = 0; e < keys.size(); ++e) {
          dprobs[e] = gemm_dot(p.dtype, doi, &v[at.k_row(b, keys.begin + e, hk)], head_dim) *
                      static_cast<float>(p.dropout.factor(b, h, i, keys.begin + e));
          p_dot_dp += probs[e] * dprobs[e];
        }
        if (p.dropout.on() && keys.size() > 0) {
          // With dropout, sum P dP (= sum P Z dO·V) is formed as every flash backward forms it,
          // D = dO · O from the forward's O rounded to the dtype: O = Z-scaled values are larger
          // than V, and their rounding is part of what a same-precision implementation pays.
          std::vector<float>& o_row = out_row_of[static_cast<size_t>(worker)];
          std::fill(o_row.begin(), o_row.end(), 0.0f);
          for (int64_t e = 0; e < keys.size(); ++e) {
            const float weight = static_cast<float>(
                round_float(p.dtype, probs[e] * static_cast<float>(p.dropout.factor(b, h, i, keys.begin + e))));
            const double* vj = &v[at.k_row(b, keys.begin + e, hk)];
            for (int64_t c = 0; c < head_dim; ++c) o_row[c] += weight * static_cast<float>(vj[c]);
          }
          p_dot_dp = 0.0f;
          for (int64_t c = 0; c < head_dim; ++c) {
            p_dot_dp += static_cast<float>(doi[c]) * static_cast<float>(round_float(p.dtype, o_row[c]));
          }
        }
        for (int64_t e = 0; e < keys.size(); ++e) {
          const int64_t j = keys.begin + e;
          const float p16 =
              static_cast<float>(round_float(p.dtype, probs[e] * static_cast<float>(p.dropout.factor(b, h, i, j))));
          const float ds16 =
              static_cast<float>(round_float(p.dtype, probs[e] * (dprobs[e] - p_dot_dp) * dscore[e]));
          for (int64_t d = 0; d < head_dim; ++d) {
            dq_acc[at.q_row(b, i, h) + d] += ds16 * static_cast<float>(k[at.k_row(b, j, hk) + d]);
            dk_acc[at.k_row(b, j, hk) + d] += ds16 * static_cast<float>(q[at.q_row(b, i, h) + d]);
            dv_acc[at.k_row(b, j, hk) + d] += p16 * static_cast<float>(doi[d]);
          }
        }
      }
    }
  });
  BaselineBackward result;
  auto round_all = [&](const std::vector<float>& acc, float scale, std::vector<double>* out) {
    out->resize(acc.size());
    for (size_t e = 0; e < acc.size(); ++e) (*out)[e] = round_float(p.dtype, acc[e] * scale);
  };
  round_all(dq_acc, p.softmax_scale, &result.dq);
  round_all(dk_acc, p.softmax_scale, &result.dk);
  round_all(dv_acc, 1.0f, &result.dv);
  return result;
}

RowSumAllowance row_sum_allowance(const ReferenceProblem& problem, DType dtype, const std::vector<double>& q,
                                  const std::vector<double>& k, const std::vector<double>& v,
                                  const std::vector<double>& out, const std::vector<double>& dout,
                                  int num_threads) {
  const Problem p = problem_of(problem, dtype);
  const Layout at{p};
  const int64_t d = p.head_dim;
  std::vector<double> exact_out(q.size()), exact_lse(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q));
  if (!reference_forward(problem, q.data(), k.data(), v.data(), exact_out.data(), exact_lse.data(), num_threads).ok()) {
    return {};
  }
  auto row_max_abs = [d](const double* row) {
    double m = 0.0;
    for (int64_t c = 0; c < d; ++c) m = std::max(m, std::fabs(row[c]));
    return m;
  };
  const double fp32_sum = static_cast<double>(d) * std::ldexp(1.0, -24) * (1.0 + std::ldexp(1.0, -7));
  // One (batch, kv head) a task, as the baseline backward: dk sums over the query heads sharing it.
  const int64_t tasks = p.batch * p.heads_kv;
  const int workers = cpu::worker_count(num_threads, tasks);
  std::vector<RowSumAllowance> worst(static_cast<size_t>(workers));
  std::vector<std::vector<float>> probs_of(static_cast<size_t>(workers), std::vector<float>(p.seqlen_k));
  std::vector<std::vector<float>> dscore_of(static_cast<size_t>(workers), std::vector<float>(p.seqlen_k));
  std::vector<std::vector<double>> dk_of(static_cast<size_t>(workers), std::vector<double>(p.seqlen_k));
  cpu::parallel_for(tasks, workers, [&](int64_t task, int worker) {
    const int64_t b = task / p.heads_kv;
    const int64_t hk = task % p.heads_kv;
    std::vector<float>& probs = probs_of[static_cast<size_t>(worker)];
    std::vector<float>& dscore = dscore_of[static_cast<size_t>(worker)];
    std::vector<double>& dk_sum = dk_of[static_cast<size_t>(worker)];
    std::fill(dk_sum.begin(), dk_sum.end(), 0.0);
    RowSumAllowance& w = worst[static_cast<size_t>(worker)];
    for (int64_t h = hk * p.group_size(); h < (hk + 1) * p.group_size(); ++h) {
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        const KeySpan keys = visible_keys(p, i);
        if (keys.size() == 0) continue;
        row_softmax(p, at, q, k, b, h, i, keys, probs, dscore);
        const int64_t row = at.q_row(b, i, h);
        double given_minus_exact = 0.0, dout_out = 0.0, dout_v = 0.0;
        for (int64_t c = 0; c < d; ++c) {
          given_minus_exact += dout[row + c] * (out[row + c] - exact_out[row + c]);
          dout_out += std::fabs(dout[row + c] * out[row + c]);
        }
        for (int64_t e = 0; e < keys.size(); ++e) {
          const double* vj = &v[at.k_row(b, keys.begin + e, hk)];
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c) dot += std::fabs(dout[row + c] * vj[c]);
          dout_v = std::max(dout_v, dot);
        }
        // With dropout the backward's dP is Z dO·V (Z = 1 / (1 - p)), its fp32 error scaled alike.
        const double keep_scale = problem.dropout_p > 0.0 ? 1.0 / (1.0 - problem.dropout_p) : 1.0;
        const double row_error = std::fabs(given_minus_exact) + fp32_sum * (dout_out + keep_scale * dout_v);
        double dq = 0.0;
        for (int64_t e = 0; e < keys.size(); ++e) dq += probs[e] * row_max_abs(&k[at.k_row(b, keys.begin + e, hk)]);
        dq *= row_error;
        if (!std::isfinite(dq)) continue;
        w.dq = std::max(w.dq, dq);
        const double q_max = row_max_abs(&q[row]);
        for (int64_t e = 0; e < keys.size(); ++e) dk_sum[keys.begin + e] += probs[e] * row_error * q_max;
      }
    }
    for (double x : dk_sum) {
      if (std::isfinite(x)) w.dk = std::max(w.dk, x);
    }
  });
  RowSumAllowance result;
  for (const RowSumAllowance& w : worst) {
    result.dq = std::max(result.dq, w.dq);
    result.dk = std::max(result.dk, w.dk);
  }
  const double scale = std::fabs(problem.softmax_scale);
  result.dq *= scale;
  result.dk *= scale;
  result.dq += ulp_at(dtype, result.dq);
  result.dk += ulp_at(dtype, result.dk);
  return result;
}

}  // namespace flashcore::accuracy
