// forward_kvcache(): validate the shapes, read and check the index tensors, then hand the call to
// the backend the problem resolved to.
#include "flashcore/kvcache.h"

#include "api/cuda_backend.h"
#include "api/kvcache_problem.h"
#include "cpu/cpu_backend.h"

namespace flashcore {

Status forward_kvcache(const KvCacheParams& params) {
  detail::KvCacheProblem problem;
  FLASHCORE_RETURN_IF_ERROR(detail::validate_kvcache(params, &problem));
  detail::KvCacheIndices indices;
  switch (problem.attn.backend) {
    case Backend::kCpu:
    case Backend::kCpuReference:
      // The CPU paths read the indices anyway: always checked.
      detail::read_host_indices(params, problem, &indices);
      FLASHCORE_RETURN_IF_ERROR(detail::check_kvcache_indices(problem, indices));
      return problem.attn.backend == Backend::kCpu ? cpu::flash_forward_kvcache(params, problem, indices)
                                                   : cpu::reference_forward_kvcache(params, problem, indices);
    case Backend::kCuda:
      if (params.check_indices) {
        FLASHCORE_RETURN_IF_ERROR(cuda::copy_kvcache_indices(params, problem, &indices));
        FLASHCORE_RETURN_IF_ERROR(detail::check_kvcache_indices(problem, indices));
      }
      return cuda::forward_kvcache(params, problem, params.check_indices ? &indices : nullptr);
    case Backend::kAuto: break;
  }
  return Status::Internal("flashcore::forward_kvcache: backend left unresolved");
}

}  // namespace flashcore
