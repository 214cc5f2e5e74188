// The float64 reference, the oracle every fast path is checked against: exact softmax attention
// computed in double from the inputs' fp16/bf16 values. It works one query row at a time over all
// keys, and shares no masking or softmax code with the fast paths, so a bug there cannot pass its
// own check.
//
// Three levels, for three kinds of caller:
//   - cpu_backend.h's reference_forward/backward (Backend::kCpuReference): round to the output dtype.
//   - reference_forward_f64/backward_f64: the same problem, results left in float64 (tests, the
//     CLI's --check), so the comparison does not inherit a rounding of the oracle.
//   - reference_attention_forward/backward: float64 inputs too, for finite-difference checks.
//
// Float64 arrays are contiguous, in the API's order:
//   q, out, dq, dout: (batch, seqlen_q, heads_q, head_dim)
//   k, v, dk, dv:     (batch, seqlen_k, heads_kv, head_dim)
//   lse:              (batch, heads_q, seqlen_q), natural log, -inf for a row that sees no key
#pragma once

#include <vector>

#include "api/problem.h"

namespace flashcore::cpu {

// num_threads: 0 uses every hardware thread. The result does not depend on it. alibi_slopes: null
// (no ALiBi; problem.alibi_slopes is not read here) or (batch, heads_q) contiguous float64 slopes.
void reference_attention_forward(const detail::AttentionProblem& problem, const double* q, const double* k,
                                 const double* v, double* out, double* lse, int num_threads,
                                 const double* alibi_slopes = nullptr);

// The exact gradient of sum(out * dout) with respect to q, k, v. It recomputes the forward in
// float64 rather than trusting a given out and lse.
void reference_attention_backward(const detail::AttentionProblem& problem, const double* q, const double* k,
                                  const double* v, const double* dout, double* dq, double* dk, double* dv,
                                  int num_threads, const double* alibi_slopes = nullptr);

// `problem` must come from validate_forward / validate_backward for these params. Reads q, k, v
// (and dout) through their views; ignores params.out, params.lse and the backend choice: the
// backward recomputes the forward in float64.
Status reference_forward_f64(const ForwardParams& params, const detail::AttentionProblem& problem,
                             std::vector<double>* out, std::vector<double>* lse);
Status reference_backward_f64(const BackwardParams& params, const detail::AttentionProblem& problem,
                              std::vector<double>* dq, std::vector<double>* dk, std::vector<double>* dv);

}  // namespace flashcore::cpu
