// The public reference's and baseline's description of a problem the API validated: what the
// tests hand to flashcore/reference.h and flashcore/accuracy.h.
#pragma once

#include "api/problem.h"
#include "flashcore/reference.h"

namespace flashcore::testing {

inline ReferenceProblem reference_problem(const detail::AttentionProblem& p) {
  ReferenceProblem r;
  r.batch = p.batch;
  r.seqlen_q = p.seqlen_q;
  r.seqlen_k = p.seqlen_k;
  r.heads_q = p.heads_q;
  r.heads_kv = p.heads_kv;
  r.head_dim = p.head_dim;
  r.softmax_scale = p.softmax_scale;
  r.causal = p.causal;
  return r;
}

}  // namespace flashcore::testing
