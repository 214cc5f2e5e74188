// What src/api needs from the CUDA backend. Built from src/cuda when CUDA is enabled, otherwise
// from src/api/cuda_unavailable.cpp, whose functions report that this build has no CUDA.
#pragma once

#include <cstddef>

#include "api/merge_problem.h"
#include "api/problem.h"

namespace flashcore::cuda {

Status forward(const ForwardParams& params, const detail::AttentionProblem& problem);
Status backward_workspace_size(const BackwardParams& params, const detail::AttentionProblem& problem,
                               std::size_t* bytes);
Status backward(const BackwardParams& params, const detail::AttentionProblem& problem);
// The family forward() / backward() would run (KernelFamily::kAuto resolved).
Status forward_family(const ForwardParams& params, const detail::AttentionProblem& problem, KernelFamily* family);
Status backward_family(const BackwardParams& params, const detail::AttentionProblem& problem, KernelFamily* family);

// merge_partials (flashcore/merge.h) on CUDA tensors, on params.stream.
Status merge_partials(const MergeParams& params, const detail::MergeProblem& problem);

}  // namespace flashcore::cuda
