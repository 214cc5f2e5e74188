// The two routes of cuda::forward_kvcache (kvcache.cu): the decode kernels on the caller's tensors,
// and the staged route (kvcache_staging.cu) for calls they cannot read in place.
#pragma once

#include "api/kvcache_problem.h"
#include "cuda/params.h"

namespace flashcore::cuda {

// Fills DecodeParams from the call and launches the decode kernels on its tensors as they are
// (head_dim a multiple of 8, cache and output rows 16-byte aligned).
Status launch_decode(const KvCacheParams& params, const detail::KvCacheProblem& p,
                     const detail::KvCacheIndices* indices, const DeviceInfo& device);

// The same call on padded copies, the caller's cache updated in place (kvcache_staging.cu).
Status forward_kvcache_staged(const KvCacheParams& params, const detail::KvCacheProblem& p,
                              const detail::KvCacheIndices* indices, const DeviceInfo& device);

}  // namespace flashcore::cuda
