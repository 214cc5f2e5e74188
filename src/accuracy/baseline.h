// The "plain same-precision implementation" of FlashAttention's correctness rule: attention as
// fp16/bf16 matrix products would compute it without any flash tricks. Its error against the
// float64 reference is the yardstick a fast kernel's error is measured by (tolerance.h).
//
// Each product takes inputs already in the dtype, accumulates in fp32 and rounds its result to
// the dtype, as a half-precision GEMM writes its output; softmax runs in fp32 on the rounded
// scores and its probabilities are rounded before P·V. The backward follows autograd through the
// same graph: dV = Pᵀ dO and dP = dO Vᵀ rounded, the softmax backward in fp32 on those, dS rounded,
// dQ = dS K · scale and dK = dSᵀ Q · scale rounded.
//
// Arrays are contiguous float64 holding dtype values, in reference.h's layouts.
#pragma once

#include <vector>

#include "api/problem.h"

namespace flashcore::accuracy {

struct BaselineForward {
  std::vector<double> out;  // (batch, seqlen_q, heads_q, head_dim), dtype values
  std::vector<double> lse;  // (batch, heads_q, seqlen_q), fp32 values
};

struct BaselineBackward {
  std::vector<double> dq;
  std::vector<double> dk;
  std::vector<double> dv;
};

// num_threads: 0 uses every hardware thread. The result does not depend on it.
BaselineForward baseline_forward(const detail::AttentionProblem& problem, const std::vector<double>& q,
                                 const std::vector<double>& k, const std::vector<double>& v, int num_threads = 0);

BaselineBackward baseline_backward(const detail::AttentionProblem& problem, const std::vector<double>& q,
                                   const std::vector<double>& k, const std::vector<double>& v,
                                   const std::vector<double>& dout, int num_threads = 0);

// `value` rounded to the nearest dtype number (via fp32, as the baseline's fp32 results are).
double round_to(DType dtype, double value);

}  // namespace flashcore::accuracy
