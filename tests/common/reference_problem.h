// The public reference's and baseline's description of a problem the API validated: what the
// tests hand to flashcore/reference.h and flashcore/accuracy.h.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "api/problem.h"
#include "flashcore/reference.h"

namespace flashcore::testing {

// `slopes` holds the ALiBi slopes the ReferenceProblem points to (needed when p has ALiBi: its
// slopes must be host memory then).
inline ReferenceProblem reference_problem(const detail::AttentionProblem& p, std::vector<double>* slopes = nullptr) {
  ReferenceProblem r;
  r.batch = p.batch;
  r.seqlen_q = p.seqlen_q;
  r.seqlen_k = p.seqlen_k;
  r.heads_q = p.heads_q;
  r.heads_kv = p.heads_kv;
  r.head_dim = p.head_dim;
  r.softmax_scale = p.softmax_scale;
  r.causal = p.causal;
  r.window_left = p.window_left;
  r.window_right = p.window_right;
  r.softcap = p.softcap;
  r.dropout_p = p.dropout_p;
  r.dropout_seed = p.dropout_seed;
  r.dropout_offset = p.dropout_offset;
  if (p.alibi_slopes != nullptr) {
    if (slopes == nullptr) std::abort();  // a test bug: the slopes would be silently dropped
    slopes->resize(static_cast<size_t>(p.batch * p.heads_q));
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t h = 0; h < p.heads_q; ++h)
        (*slopes)[static_cast<size_t>(b * p.heads_q + h)] = p.alibi_slopes[b * p.alibi_batch_stride + h];
    r.alibi_slopes = slopes->data();
    r.alibi_slopes_per_batch = true;
  }
  return r;
}

}  // namespace flashcore::testing
