// The float64 reference's arithmetic: one query row at a time, every key of the row, in double.
// Deliberately plain: no tiling, no online softmax, its own visibility rule written from the header.
#include "cpu/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cpu/parallel_for.h"

namespace flashcore::cpu {
namespace {

using std::int64_t;

// Offsets into the contiguous float64 arrays described in reference.h.
struct Layout {
  const detail::AttentionProblem& p;
  int64_t q_row(int64_t b, int64_t i, int64_t h) const { return ((b * p.seqlen_q + i) * p.heads_q + h) * p.head_dim; }
  int64_t k_row(int64_t b, int64_t j, int64_t h) const { return ((b * p.seqlen_k + j) * p.heads_kv + h) * p.head_dim; }
  int64_t lse_at(int64_t b, int64_t h, int64_t i) const { return (b * p.heads_q + h) * p.seqlen_q + i; }
};

// attention.h: with causal, query i sees key j iff j <= i + seqlen_k - seqlen_q.
bool sees(const detail::AttentionProblem& p, int64_t i, int64_t j) {
  return !p.causal || j - i <= p.seqlen_k - p.seqlen_q;
}

double dot(const double* a, const double* b, int64_t n) {
  double s = 0.0;
  for (int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// One past the last key query row i sees, in [0, seqlen_k]: 0 means the row sees no key.
int64_t visible_keys(const detail::AttentionProblem& p, int64_t i) {
  int64_t n = 0;
  while (n < p.seqlen_k && sees(p, i, n)) ++n;  // sees() holds for a prefix of the keys
  return n;
}

// The row max the plain formula subtracts: NaN as soon as one score is NaN. std::max(m, NaN)
// returns m, which would make a row of NaN scores look like a row that sees no key.
double nan_propagating_max(double m, double x) { return (x > m || std::isnan(x)) ? x : m; }

// Softmax probabilities of query row i against its first `visible` keys of kv head hk, into
// probs[0, visible). Returns the row's natural-log sum-exp, -inf when the row sees no key.
// Non-finite scores go through the plain formula exp(s - max) / sum unguarded: a NaN score, a
// +inf one (inf - inf) or a row whose every score is -inf (-inf - -inf) gives NaN probabilities
// and a NaN LSE; a -inf score among finite ones gets probability 0.
double row_softmax(const detail::AttentionProblem& p, const Layout& at, const double* q, const double* k, int64_t b,
                   int64_t h, int64_t hk, int64_t i, int64_t visible, double* probs) {
  if (visible == 0) return -std::numeric_limits<double>::infinity();
  const double scale = static_cast<double>(p.softmax_scale);
  const double* qi = q + at.q_row(b, i, h);
  double row_max = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < visible; ++j) {
    probs[j] = scale * dot(qi, k + at.k_row(b, j, hk), p.head_dim);
    row_max = nan_propagating_max(row_max, probs[j]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < visible; ++j) {
    probs[j] = std::exp(probs[j] - row_max);
    sum += probs[j];
  }
  for (int64_t j = 0; j < visible; ++j) probs[j] /= sum;
  return row_max + std::log(sum);
}

}  // namespace

void reference_attention_forward(const detail::AttentionProblem& p, const double* q, const double* k, const double* v,
                                 double* out, double* lse, int num_threads) {
  const Layout at{p};
  const int64_t tasks = p.batch * p.heads_q;  // one (batch, query head) each
  const int workers = worker_count(num_threads, tasks);
  std::vector<std::vector<double>> probs(static_cast<size_t>(workers), std::vector<double>(p.seqlen_k));

  parallel_for(tasks, workers, [&](int64_t task, int worker) {
    const int64_t b = task / p.heads_q;
    const int64_t h = task % p.heads_q;
    const int64_t hk = h / p.group_size();
    double* pr = probs[static_cast<size_t>(worker)].data();
    for (int64_t i = 0; i < p.seqlen_q; ++i) {
      const int64_t visible = visible_keys(p, i);
      lse[at.lse_at(b, h, i)] = row_softmax(p, at, q, k, b, h, hk, i, visible, pr);
      double* oi = out + at.q_row(b, i, h);
      std::fill(oi, oi + p.head_dim, 0.0);
      // Masked keys are not read at all (their v may be non-finite; 0 * inf would be NaN).
      for (int64_t j = 0; j < visible; ++j) {
        const double* vj = v + at.k_row(b, j, hk);
        for (int64_t d = 0; d < p.head_dim; ++d) oi[d] += pr[j] * vj[d];
      }
    }
  });
}

// With P = softmax(S), S = scale * q kᵀ, out = P v and L = sum(out * dout):
//   dv_j = sum_i P_ij dout_i           dP_ij = dout_i · v_j
//   dS_ij = P_ij (dP_ij - sum_l P_il dP_il)
//   dq_i = scale * sum_j dS_ij k_j     dk_j = scale * sum_i dS_ij q_i
// dk and dv add up over the query heads sharing a kv head, so a task owns one (batch, kv head).
void reference_attention_backward(const detail::AttentionProblem& p, const double* q, const double* k, const double* v,
                                  const double* dout, double* dq, double* dk, double* dv, int num_threads) {
  const Layout at{p};
  const double scale = static_cast<double>(p.softmax_scale);
  const int64_t tasks = p.batch * p.heads_kv;
  const int workers = worker_count(num_threads, tasks);
  std::vector<std::vector<double>> probs(static_cast<size_t>(workers), std::vector<double>(p.seqlen_k));
  std::vector<std::vector<double>> dprobs(static_cast<size_t>(workers), std::vector<double>(p.seqlen_k));

  parallel_for(tasks, workers, [&](int64_t task, int worker) {
    const int64_t b = task / p.heads_kv;
    const int64_t hk = task % p.heads_kv;
    double* pr = probs[static_cast<size_t>(worker)].data();
    double* dpr = dprobs[static_cast<size_t>(worker)].data();
    for (int64_t j = 0; j < p.seqlen_k; ++j) {
      std::fill(dk + at.k_row(b, j, hk), dk + at.k_row(b, j, hk) + p.head_dim, 0.0);
      std::fill(dv + at.k_row(b, j, hk), dv + at.k_row(b, j, hk) + p.head_dim, 0.0);
    }
    for (int64_t h = hk * p.group_size(); h < (hk + 1) * p.group_size(); ++h) {
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        const int64_t visible = visible_keys(p, i);
        row_softmax(p, at, q, k, b, h, hk, i, visible, pr);
        const double* qi = q + at.q_row(b, i, h);
        const double* doi = dout + at.q_row(b, i, h);
        double p_dot_dp = 0.0;
        for (int64_t j = 0; j < visible; ++j) {
          dpr[j] = dot(doi, v + at.k_row(b, j, hk), p.head_dim);
          p_dot_dp += pr[j] * dpr[j];
        }
        double* dqi = dq + at.q_row(b, i, h);
        std::fill(dqi, dqi + p.head_dim, 0.0);
        // Every visible key, even one whose probability underflowed to 0: the plain formula's
        // 0 * inf is NaN when k or dout holds an infinity. Masked keys contribute nothing.
        for (int64_t j = 0; j < visible; ++j) {
          const double ds = pr[j] * (dpr[j] - p_dot_dp);
          const double* kj = k + at.k_row(b, j, hk);
          double* dkj = dk + at.k_row(b, j, hk);
          double* dvj = dv + at.k_row(b, j, hk);
          for (int64_t d = 0; d < p.head_dim; ++d) {
            dqi[d] += scale * ds * kj[d];
            dkj[d] += scale * ds * qi[d];
            dvj[d] += pr[j] * doi[d];
          }
        }
      }
    }
  });
}

}  // namespace flashcore::cpu
