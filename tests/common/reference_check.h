// The outputs an accuracy test left in its AttentionTensors, judged against the float64 reference
// under FlashAttention's rule (flashcore/accuracy.h): the comparison every forward and backward
// test makes, CPU and GPU alike, in one place.
#pragma once

#include <vector>

#include "common/attention_tensors.h"
#include "flashcore/accuracy.h"

namespace flashcore::testing {

// out and lse against the reference's, each within 2x the same-precision baseline's error.
std::vector<accuracy::Comparison> compare_forward_to_reference(const AttentionTensors& t);

// dq, dk and dv against the reference's, each within 3x the baseline's error. With
// `row_sum_allowance` dq and dk also get accuracy.h's row_sum_allowance for the out held in `t`
// (what FlashAttention's D = rowsum(dO * O) adds where rows see one to a few keys).
std::vector<accuracy::Comparison> compare_backward_to_reference(const AttentionTensors& t,
                                                                bool row_sum_allowance = false);

}  // namespace flashcore::testing
