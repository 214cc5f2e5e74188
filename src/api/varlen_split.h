// Variable-length calls on the CPU backends: one dense call (batch 1) per sequence, over views of
// the packed tensors. The offsets are host memory there, already checked by the validation; a
// sequence without keys gets output 0 and LSE -inf, keys without queries gradients 0.
#pragma once

#include "api/problem.h"
#include "flashcore/attention.h"

namespace flashcore::detail {

Status forward_by_sequence(const ForwardParams& params, const AttentionProblem& problem);
Status backward_by_sequence(const BackwardParams& params, const AttentionProblem& problem);

// A dense call already validated into `problem`, on the backend it names (attention.cpp): what
// forward() and backward() run after validation, and what the per-sequence calls above run with
// problem.dropout_batch0 set to their sequence's index.
Status run_forward(const ForwardParams& params, const AttentionProblem& problem);
Status run_backward(const BackwardParams& params, const AttentionProblem& problem);

}  // namespace flashcore::detail
