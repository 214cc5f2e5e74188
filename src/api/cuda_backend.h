// What src/api needs from the CUDA backend. Built from src/cuda when CUDA is enabled, otherwise
// from src/api/cuda_unavailable.cpp, whose functions report that this build has no CUDA.
#pragma once

#include <cstddef>

#include "api/kvcache_problem.h"
#include "api/merge_problem.h"
#include "api/paged_kv.h"
#include "api/problem.h"

namespace flashcore::cuda {

Status forward(const ForwardParams& params, const detail::AttentionProblem& problem);
Status backward_workspace_size(const BackwardParams& params, const detail::AttentionProblem& problem,
                               std::size_t* bytes);
Status backward(const BackwardParams& params, const detail::AttentionProblem& problem);
// The family forward() / backward() would run (KernelFamily::kAuto resolved).
Status forward_family(const ForwardParams& params, const detail::AttentionProblem& problem, KernelFamily* family);
Status backward_family(const BackwardParams& params, const detail::AttentionProblem& problem, KernelFamily* family);

// forward() with paged k and v on CUDA tensors (api/paged_kv.h): gathers the pages into packed
// copies on params.stream, then runs detail::gathered_call on them. The layout is checked; the
// device-side offsets and page ids are not read on the host.
Status forward_paged(const ForwardParams& params, const detail::PagedKv& layout);

// merge_partials (flashcore/merge.h) on CUDA tensors, on params.stream.
Status merge_partials(const MergeParams& params, const detail::MergeProblem& problem);
// forward_kvcache (flashcore/kvcache.h). copy_kvcache_indices copies the index tensors to the host
// (a synchronous copy on params.stream) for the API's checks; forward_kvcache then runs with them
// (or with null when params.check_indices is off: the heuristic then sizes splits by the capacity).
Status copy_kvcache_indices(const KvCacheParams& params, const detail::KvCacheProblem& problem,
                            detail::KvCacheIndices* indices);
Status forward_kvcache(const KvCacheParams& params, const detail::KvCacheProblem& problem,
                       const detail::KvCacheIndices* indices);

}  // namespace flashcore::cuda
