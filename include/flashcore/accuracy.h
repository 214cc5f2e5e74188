// FlashAttention's accuracy rule, for checking an attention implementation against the float64
// reference (flashcore/reference.h): the tests and `flashcore fuzz` judge results with it, and so
// can anyone testing a kernel of their own.
//
// The rule: a result's max error against the reference may be at most `factor` (2 for the
// forward, 3 for gradients) times the max error of a plain same-precision implementation (the
// baseline below), plus a noise floor of 2 ulp of the output dtype at the output's magnitude (the
// largest |reference| value).
//
// Non-finite values: where the reference is not finite (the -inf LSE of a row that sees no key, or
// the NaN and infinities non-finite inputs lead to, attention.h) the result must be the same: NaN
// where the reference is NaN, the same infinity where it is infinite. Anywhere else a NaN or an
// infinity fails, so NaN never passes where the reference is finite.
//
// The baseline is attention as fp16/bf16 matrix products compute it without any flash tricks.
// Each product takes inputs already in the dtype, accumulates in fp32 and rounds its result to the
// dtype, as a half-precision GEMM writes its output; softmax runs in fp32 on the rounded scores (the
// softcap and ALiBi of the ReferenceProblem applied to them in fp32, the window masking them) and
// its probabilities are rounded before P·V. The backward follows autograd through the same graph:
// dV = Pᵀ dO and dP = dO Vᵀ rounded, the softmax backward in fp32 on those, dS rounded,
// dQ = dS K · scale and dK = dSᵀ Q · scale rounded. Non-finite inputs go through the same plain
// formula as the reference's. Arrays are contiguous float64 holding dtype values, in reference.h's
// layouts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashcore/reference.h"
#include "flashcore/tensor.h"

namespace flashcore::accuracy {

struct Comparison {
  bool ok = false;
  double max_error = 0.0;       // max |got - reference| over finite reference values
  double baseline_error = 0.0;  // max |baseline - reference|
  double noise_floor = 0.0;     // 2 ulp of dtype at `magnitude`
  double allowed = 0.0;         // factor * baseline_error + noise_floor
  double magnitude = 0.0;       // max |reference|
  std::int64_t worst_index = -1;
  std::string message;  // one line: what was compared and, on failure, where and why
};

// The spacing of `dtype` numbers at |value| (fp16 and bf16 subnormals included).
double ulp_at(DType dtype, double value);

// `name` labels the message. All three vectors are in the same element order.
Comparison compare_to_reference(const std::string& name, DType dtype, double factor, const std::vector<double>& got,
                                const std::vector<double>& baseline, const std::vector<double>& reference);

struct BaselineForward {
  std::vector<double> out;  // (batch, seqlen_q, heads_q, head_dim), dtype values
  std::vector<double> lse;  // (batch, heads_q, seqlen_q), fp32 values
};

struct BaselineBackward {
  std::vector<double> dq;
  std::vector<double> dk;
  std::vector<double> dv;
};

// The baseline in `dtype` (fp16 or bf16) for `problem` (its softmax_scale is used as a float).
// num_threads: 0 uses every hardware thread; the result does not depend on it.
BaselineForward baseline_forward(const ReferenceProblem& problem, DType dtype, const std::vector<double>& q,
                                 const std::vector<double>& k, const std::vector<double>& v, int num_threads = 0);

BaselineBackward baseline_backward(const ReferenceProblem& problem, DType dtype, const std::vector<double>& q,
                                   const std::vector<double>& k, const std::vector<double>& v,
                                   const std::vector<double>& dout, int num_threads = 0);

// dq and dk when every row sees one key (or none): seqlen_k == 1, or a window of (0, 0). The
// softmax is constant, the
// exact dq and dk are 0 and so is the baseline's error, and the rule's bound collapses to 2 ulp at
// magnitude 0. FlashAttention's backward forms dS = dP - D from two fp32 dot products of the same
// terms summed in different orders (dP = dO·V by the tensor cores, D = rowsum(dO·O) with O = V),
// each off by at most d·2^-24·Σ|dO_i V_i|. This returns the largest |dq| (`for_dq`) or |dk| that
// error can produce: scale · |dS| bound · max|k| for dq, and for dk the same summed over the
// query rows that share the key (seqlen_q · heads_q / heads_kv). With dropout O is Z·V rounded to
// the dtype (Z = 1/(1 - p)), so D gains up to Z·u·Σ|dO_i V_i| (u the dtype's unit roundoff), which the
// bound adds. Results are judged by max|got| <= this bound + 1 ulp of it.
double single_key_gradient_bound(const ReferenceProblem& problem, DType dtype, const std::vector<double>& q,
                                 const std::vector<double>& k, const std::vector<double>& v,
                                 const std::vector<double>& dout, bool for_dq);

// `value` rounded to the nearest dtype number (via fp32, as the baseline's fp32 results are).
double round_to(DType dtype, double value);

}  // namespace flashcore::accuracy
