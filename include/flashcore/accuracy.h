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
// dtype, as a half-precision GEMM writes its output; softmax runs in fp32 on the rounded scores and
// its probabilities are rounded before P·V. The softcap is applied as elementwise operations on
// dtype tensors do it, each step rounded to the dtype (s / softcap, tanh, times softcap: FlashAttention's
// own test reference, attention_ref without upcast); the ALiBi bias is added in fp32 and the window masks. The backward follows autograd through the same graph:
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
  double extra = 0.0;           // an algorithm's known extra error (row_sum_allowance), 0 by default
  double allowed = 0.0;         // factor * baseline_error + noise_floor + extra
  double magnitude = 0.0;       // max |reference|
  std::int64_t worst_index = -1;
  std::string message;  // one line: what was compared and, on failure, where and why
};

// The spacing of `dtype` numbers at |value| (fp16 and bf16 subnormals included).
double ulp_at(DType dtype, double value);

// `name` labels the message. All three vectors are in the same element order. `extra` widens the
// allowance by an error the rule knows the algorithm makes beyond the baseline's (dq and dk of
// FlashAttention's backward: row_sum_allowance below).
Comparison compare_to_reference(const std::string& name, DType dtype, double factor, const std::vector<double>& got,
                                const std::vector<double>& baseline, const std::vector<double>& reference,
                                double extra = 0.0);

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

// The error FlashAttention's backward adds to dq and dk through the softmax backward's row sums.
// It forms dS_ij = P_ij (dP_ij - D_i) with D_i = sum_c dO_ic O_ic taken from the O it is given (the
// forward's rounded output) where the plain backward sums P_ij dP_ij, and it sums D and dP in fp32
// in different orders. Where rows see many keys the baseline's own rounding hides this; where they
// see one to a few it does not: with one key (seqlen_k 1, a window of (0, 0)) the exact dq and dk
// are 0, and so is the baseline's error. The bound, per query row i:
//   E_i = |sum_c dO_ic (O_ic - O*_ic)| + d 2^-24 (1 + 2^-7) (sum_c |dO_ic O_ic| + max_j sum_c |dO_ic V_jc|)
//   dq: scale * max_i  E_i sum_j P_ij max_c |K_jc|
//   dk: scale * max_j  sum_i P_ij E_i max_c |Q_ic|   (i over every query head sharing j's kv head)
// P is the row's softmax as the baseline computes it, O the output the backward was given, O* the
// float64 reference's (computed here), j over the keys the row sees. Each comes back with 1 ulp of
// itself added; rows with a non-finite term add nothing (the rule's non-finite checks cover them).
struct RowSumAllowance {
  double dq = 0.0;
  double dk = 0.0;
};

RowSumAllowance row_sum_allowance(const ReferenceProblem& problem, DType dtype, const std::vector<double>& q,
                                  const std::vector<double>& k, const std::vector<double>& v,
                                  const std::vector<double>& out, const std::vector<double>& dout,
                                  int num_threads = 0);

// `value` rounded to the nearest dtype number (via fp32, as the baseline's fp32 results are).
double round_to(DType dtype, double value);

}  // namespace flashcore::accuracy
