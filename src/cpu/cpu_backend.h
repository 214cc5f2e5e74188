// The CPU backends: a float64 reference (the oracle) and a tiled, threaded flash implementation.
// Both take arguments already checked by src/api/validate.cpp.
#pragma once

#include <cstddef>

#include "api/merge_problem.h"
#include "api/kvcache_problem.h"
#include "api/problem.h"

namespace flashcore::cpu {

// Tiled online-softmax attention: never materialises seqlen_q x seqlen_k, fp32 accumulation,
// threaded over batch x heads x query blocks.
Status flash_forward(const ForwardParams& params, const detail::AttentionProblem& problem);
Status flash_backward(const BackwardParams& params, const detail::AttentionProblem& problem);

// Host memory the flash backend allocates for these params beyond their tensors: each worker's
// tiles (O(block x head_dim)) and, for the backward, one float per (batch, query head, query row).
// Never seqlen_q x seqlen_k. For reports such as the CLI's memory line.
std::size_t flash_forward_scratch_bytes(const detail::AttentionProblem& problem, int num_threads);
std::size_t flash_backward_scratch_bytes(const detail::AttentionProblem& problem, int num_threads);

// Float64 reference (reference.h), results rounded to the output dtype. It computes each query
// row's scores against every key and shares no masking or softmax code with any fast path, so a
// bug there cannot pass its own check. It recomputes the forward for the backward, so the backward
// ignores params.out and params.lse.
Status reference_forward(const ForwardParams& params, const detail::AttentionProblem& problem);
Status reference_backward(const BackwardParams& params, const detail::AttentionProblem& problem);

// merge_partials (flashcore/merge.h) on CPU tensors, threaded over rows.
Status merge_partials(const MergeParams& params, const detail::MergeProblem& problem);
// forward_kvcache on the CPU, with indices already checked: the append (rotary in fp32, rounded to
// the dtype), then each sequence's attention through flash_forward (a paged sequence is gathered
// into a contiguous copy first). And the float64 reference's version (reference_kvcache.cpp):
// rotary in float64, results rounded to the dtype.
Status flash_forward_kvcache(const KvCacheParams& params, const detail::KvCacheProblem& problem,
                             const detail::KvCacheIndices& indices);
Status reference_forward_kvcache(const KvCacheParams& params, const detail::KvCacheProblem& problem,
                                 const detail::KvCacheIndices& indices);

}  // namespace flashcore::cpu
