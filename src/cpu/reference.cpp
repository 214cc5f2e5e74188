// The float64 reference's arithmetic: one query row at a time, every key of the row, in double.
// Deliberately plain: no tiling, no online softmax, its own visibility rule written from the header.
#include "cpu/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <vector>

#include "cpu/parallel_for.h"
#include "cpu/reference_dropout.h"

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

// attention.h's visibility rule, written out from the header: query i sees key j iff j is at
// most window_right past i's diagonal (causal: 0) and at most window_left before it.
bool sees(const detail::AttentionProblem& p, int64_t i, int64_t j) {
  const int64_t offset = j - (i + p.seqlen_k - p.seqlen_q);  // > 0: right of the diagonal
  if (p.causal && offset > 0) return false;
  if (p.window_right >= 0 && offset > p.window_right) return false;
  if (p.window_left >= 0 && offset < -p.window_left) return false;
  return true;
}

double dot(const double* a, const double* b, int64_t n) {
  double s = 0.0;
  for (int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// The keys row i sees, in increasing order (every key is tested: no assumption on their shape).
void visible_keys(const detail::AttentionProblem& p, int64_t i, std::vector<int64_t>* keys) {
  keys->clear();
  for (int64_t j = 0; j < p.seqlen_k; ++j)
    if (sees(p, i, j)) keys->push_back(j);
}

// The row max the plain formula subtracts: NaN as soon as one score is NaN. std::max(m, NaN)
// returns m, which would make a row of NaN scores look like a row that sees no key.
double nan_propagating_max(double m, double x) { return (x > m || std::isnan(x)) ? x : m; }

// The score the softmax sees and its derivative with respect to scale * q·k (attention.h):
//   s = scale * q·k;  softcap > 0: s = softcap * tanh(s / softcap);  ALiBi: s -= slope * |i + Sk - Sq - j|.
struct Score {
  double value;
  double dvalue;  // d value / d (scale * q·k): 1, or 1 - tanh² with softcap
};
Score score(const detail::AttentionProblem& p, double qk, double slope, int64_t i, int64_t j) {
  double s = static_cast<double>(p.softmax_scale) * qk;
  double ds = 1.0;
  if (p.softcap > 0.0f) {
    const double cap = static_cast<double>(p.softcap);
    const double t = std::tanh(s / cap);
    s = cap * t;
    ds = 1.0 - t * t;
  }
  s -= slope * static_cast<double>(std::llabs(i + p.seqlen_k - p.seqlen_q - j));
  return {s, ds};
}

// Softmax probabilities of query row i over `keys` (its visible keys) of kv head hk, into
// probs[0, keys.size()), and each score's derivative into dscore (when not null). Returns the
// row's natural-log sum-exp, -inf when the row sees no key. Non-finite scores go through the plain
// formula exp(s - max) / sum unguarded: a NaN score, a +inf one (inf - inf) or a row whose every
// score is -inf (-inf - -inf) gives NaN probabilities and a NaN LSE; a -inf score among finite
// ones gets probability 0.
double row_softmax(const detail::AttentionProblem& p, const Layout& at, const double* q, const double* k, double slope,
                   int64_t b, int64_t h, int64_t hk, int64_t i, const std::vector<int64_t>& keys, double* probs,
                   double* dscore) {
  if (keys.empty()) return -std::numeric_limits<double>::infinity();
  const double* qi = q + at.q_row(b, i, h);
  double row_max = -std::numeric_limits<double>::infinity();
  for (size_t e = 0; e < keys.size(); ++e) {
    const Score sc = score(p, dot(qi, k + at.k_row(b, keys[e], hk), p.head_dim), slope, i, keys[e]);
    probs[e] = sc.value;
    if (dscore != nullptr) dscore[e] = sc.dvalue;
    row_max = nan_propagating_max(row_max, probs[e]);
  }
  double sum = 0.0;
  for (size_t e = 0; e < keys.size(); ++e) {
    probs[e] = std::exp(probs[e] - row_max);
    sum += probs[e];
  }
  for (size_t e = 0; e < keys.size(); ++e) probs[e] /= sum;
  return row_max + std::log(sum);
}

// The problem's dropout as the reference reads it (reference_dropout.h).
ReferenceDropout dropout_of(const detail::AttentionProblem& p) {
  ReferenceDropout d;
  d.p = static_cast<double>(p.dropout_p);
  d.seed = p.dropout_seed;
  d.offset = p.dropout_offset;
  d.heads_q = p.heads_q;
  d.batch0 = p.dropout_batch0;
  return d;
}

double slope_of(const double* alibi_slopes, const detail::AttentionProblem& p, int64_t b, int64_t h) {
  return alibi_slopes == nullptr ? 0.0 : alibi_slopes[b * p.heads_q + h];
}

}  // namespace

void reference_attention_forward(const detail::AttentionProblem& p, const double* q, const double* k, const double* v,
                                 double* out, double* lse, int num_threads, const double* alibi_slopes) {
  const Layout at{p};
  const ReferenceDropout dropout = dropout_of(p);
  const int64_t tasks = p.batch * p.heads_q;  // one (batch, query head) each
  const int workers = worker_count(num_threads, tasks);
  std::vector<std::vector<double>> probs(static_cast<size_t>(workers), std::vector<double>(p.seqlen_k));
  std::vector<std::vector<int64_t>> keys_of(static_cast<size_t>(workers));

  parallel_for(tasks, workers, [&](int64_t task, int worker) {
    const int64_t b = task / p.heads_q;
    const int64_t h = task % p.heads_q;
    const int64_t hk = h / p.group_size();
    const double slope = slope_of(alibi_slopes, p, b, h);
    double* pr = probs[static_cast<size_t>(worker)].data();
    std::vector<int64_t>& keys = keys_of[static_cast<size_t>(worker)];
    for (int64_t i = 0; i < p.seqlen_q; ++i) {
      visible_keys(p, i, &keys);
      lse[at.lse_at(b, h, i)] = row_softmax(p, at, q, k, slope, b, h, hk, i, keys, pr, nullptr);
      double* oi = out + at.q_row(b, i, h);
      std::fill(oi, oi + p.head_dim, 0.0);
      // Masked keys are not read at all (their v may be non-finite; 0 * inf would be NaN).
      for (size_t e = 0; e < keys.size(); ++e) {
        const double* vj = v + at.k_row(b, keys[e], hk);
        const double weight = pr[e] * dropout.factor(b, h, i, keys[e]);
        for (int64_t d = 0; d < p.head_dim; ++d) oi[d] += weight * vj[d];
      }
    }
  });
}

// With P = softmax(S), S = score(scale * q kᵀ) (softcap, ALiBi), out = (P∘Z) v (Z: dropout's
// factors, 1 without it) and L = sum(out * dout):
//   dv_j = sum_i P_ij Z_ij dout_i      dP_ij = Z_ij dout_i · v_j
//   dS_ij = P_ij (dP_ij - sum_l P_il dP_il) * S'_ij     (S' = 1 - tanh² with softcap, else 1)
//   dq_i = scale * sum_j dS_ij k_j     dk_j = scale * sum_i dS_ij q_i
// dk and dv add up over the query heads sharing a kv head, so a task owns one (batch, kv head).
void reference_attention_backward(const detail::AttentionProblem& p, const double* q, const double* k, const double* v,
                                  const double* dout, double* dq, double* dk, double* dv, int num_threads,
                                  const double* alibi_slopes) {
  const Layout at{p};
  const ReferenceDropout dropout = dropout_of(p);
  const double scale = static_cast<double>(p.softmax_scale);
  const int64_t tasks = p.batch * p.heads_kv;
  const int workers = worker_count(num_threads, tasks);
  std::vector<std::vector<double>> probs(static_cast<size_t>(workers), std::vector<double>(p.seqlen_k));
  std::vector<std::vector<double>> dprobs(static_cast<size_t>(workers), std::vector<double>(p.seqlen_k));
  std::vector<std::vector<double>> dscores(static_cast<size_t>(workers), std::vector<double>(p.seqlen_k));
  std::vector<std::vector<double>> dropped_of(static_cast<size_t>(workers), std::vector<double>(p.seqlen_k));
  std::vector<std::vector<int64_t>> keys_of(static_cast<size_t>(workers));

  parallel_for(tasks, workers, [&](int64_t task, int worker) {
    const int64_t b = task / p.heads_kv;
    const int64_t hk = task % p.heads_kv;
    double* pr = probs[static_cast<size_t>(worker)].data();
    double* dpr = dprobs[static_cast<size_t>(worker)].data();
    double* dsc = dscores[static_cast<size_t>(worker)].data();
    double* dropped = dropped_of[static_cast<size_t>(worker)].data();  // P Z: the probabilities out saw
    std::vector<int64_t>& keys = keys_of[static_cast<size_t>(worker)];
    for (int64_t j = 0; j < p.seqlen_k; ++j) {
      std::fill(dk + at.k_row(b, j, hk), dk + at.k_row(b, j, hk) + p.head_dim, 0.0);
      std::fill(dv + at.k_row(b, j, hk), dv + at.k_row(b, j, hk) + p.head_dim, 0.0);
    }
    for (int64_t h = hk * p.group_size(); h < (hk + 1) * p.group_size(); ++h) {
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        visible_keys(p, i, &keys);
        row_softmax(p, at, q, k, slope_of(alibi_slopes, p, b, h), b, h, hk, i, keys, pr, dsc);
        const double* qi = q + at.q_row(b, i, h);
        const double* doi = dout + at.q_row(b, i, h);
        double p_dot_dp = 0.0;
        for (size_t e = 0; e < keys.size(); ++e) {
          const double z = dropout.factor(b, h, i, keys[e]);
          dpr[e] = z * dot(doi, v + at.k_row(b, keys[e], hk), p.head_dim);  // dL/dP through the dropout
          dropped[e] = pr[e] * z;
          p_dot_dp += pr[e] * dpr[e];
        }
        double* dqi = dq + at.q_row(b, i, h);
        std::fill(dqi, dqi + p.head_dim, 0.0);
        // Every visible key, even one whose probability underflowed to 0: the plain formula's
        // 0 * inf is NaN when k or dout holds an infinity. Masked keys contribute nothing.
        for (size_t e = 0; e < keys.size(); ++e) {
          const double ds = pr[e] * (dpr[e] - p_dot_dp) * dsc[e];
          const double* kj = k + at.k_row(b, keys[e], hk);
          double* dkj = dk + at.k_row(b, keys[e], hk);
          double* dvj = dv + at.k_row(b, keys[e], hk);
          for (int64_t d = 0; d < p.head_dim; ++d) {
            dqi[d] += scale * ds * kj[d];
            dkj[d] += scale * ds * qi[d];
            dvj[d] += dropped[e] * doi[d];
          }
        }
      }
    }
  });
}

}  // namespace flashcore::cpu
