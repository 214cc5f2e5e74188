// The CPU backends: a float64 reference (the oracle) and a tiled, threaded flash implementation.
// Both take arguments already checked by src/api/validate.cpp.
#pragma once

#include "api/problem.h"

namespace flashcore::cpu {

// Tiled online-softmax attention: never materialises seqlen_q x seqlen_k, fp32 accumulation,
// threaded over batch x heads x query blocks.
Status flash_forward(const ForwardParams& params, const detail::AttentionProblem& problem);
Status flash_backward(const BackwardParams& params, const detail::AttentionProblem& problem);

// Float64 reference. It materialises the full score matrix of one (batch, head) at a time and
// shares no masking or softmax code with any fast path, so a bug there cannot pass its own check.
Status reference_forward(const ForwardParams& params, const detail::AttentionProblem& problem);
Status reference_backward(const BackwardParams& params, const detail::AttentionProblem& problem);

}  // namespace flashcore::cpu
