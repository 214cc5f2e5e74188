// forward() and backward(): validate, then hand the call to the backend the problem resolved to.
#include "flashcore/attention.h"

#include "api/cuda_backend.h"
#include "api/paged_kv.h"
#include "api/problem.h"
#include "api/varlen_split.h"
#include "cpu/cpu_backend.h"

namespace flashcore {

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::kAuto: return "auto";
    case Backend::kCpu: return "cpu";
    case Backend::kCpuReference: return "cpu_reference";
    case Backend::kCuda: return "cuda";
  }
  return "unknown";
}

const char* kernel_family_name(KernelFamily family) {
  switch (family) {
    case KernelFamily::kAuto: return "auto";
    case KernelFamily::kSm80: return "sm80";
    case KernelFamily::kSm90: return "sm90";
  }
  return "unknown";
}

namespace detail {

Status run_forward(const ForwardParams& params, const AttentionProblem& problem) {
  switch (problem.backend) {
    case Backend::kCpu: return cpu::flash_forward(params, problem);
    case Backend::kCpuReference: return cpu::reference_forward(params, problem);
    case Backend::kCuda: return cuda::forward(params, problem);
    case Backend::kAuto: break;
  }
  return Status::Internal("flashcore::forward: backend left unresolved");
}

Status run_backward(const BackwardParams& params, const AttentionProblem& problem) {
  switch (problem.backend) {
    case Backend::kCpu: return cpu::flash_backward(params, problem);
    case Backend::kCpuReference: return cpu::reference_backward(params, problem);
    case Backend::kCuda: return cuda::backward(params, problem);
    case Backend::kAuto: break;
  }
  return Status::Internal("flashcore::backward: backend left unresolved");
}

}  // namespace detail

Status forward(const ForwardParams& params) {
  if (params.block_table.present()) return detail::forward_paged(params);
  detail::AttentionProblem problem;
  FLASHCORE_RETURN_IF_ERROR(detail::validate_forward(params, &problem));
  if (problem.varlen() && problem.backend != Backend::kCuda) return detail::forward_by_sequence(params, problem);
  return detail::run_forward(params, problem);
}

Status backward_workspace_size(const BackwardParams& params, std::size_t* bytes) {
  if (bytes == nullptr) return Status::InvalidArgument("flashcore::backward_workspace_size: bytes: is null");
  detail::AttentionProblem problem;
  FLASHCORE_RETURN_IF_ERROR(detail::validate_backward(params, &problem));
  if (problem.backend != Backend::kCuda) {
    *bytes = 0;
    return Status::Ok();
  }
  return cuda::backward_workspace_size(params, problem, bytes);
}

Status backward(const BackwardParams& params) {
  detail::AttentionProblem problem;
  FLASHCORE_RETURN_IF_ERROR(detail::validate_backward(params, &problem));
  if (problem.varlen() && problem.backend != Backend::kCuda) return detail::backward_by_sequence(params, problem);
  return detail::run_backward(params, problem);
}

Status host_scratch_bytes(const ForwardParams& params, std::size_t* bytes) {
  if (bytes == nullptr) return Status::InvalidArgument("flashcore::host_scratch_bytes: bytes: is null");
  detail::AttentionProblem problem;
  FLASHCORE_RETURN_IF_ERROR(detail::validate_forward(params, &problem));
  *bytes = problem.backend == Backend::kCpu ? cpu::flash_forward_scratch_bytes(problem, params.num_threads) : 0;
  return Status::Ok();
}

Status host_scratch_bytes(const BackwardParams& params, std::size_t* bytes) {
  if (bytes == nullptr) return Status::InvalidArgument("flashcore::host_scratch_bytes: bytes: is null");
  detail::AttentionProblem problem;
  FLASHCORE_RETURN_IF_ERROR(detail::validate_backward(params, &problem));
  *bytes = problem.backend == Backend::kCpu ? cpu::flash_backward_scratch_bytes(problem, params.num_threads) : 0;
  return Status::Ok();
}

Status selected_kernels(const ForwardParams& params, KernelFamily* family) {
  if (family == nullptr) return Status::InvalidArgument("flashcore::selected_kernels: family: is null");
  detail::AttentionProblem problem;
  FLASHCORE_RETURN_IF_ERROR(detail::validate_forward(params, &problem));
  *family = KernelFamily::kAuto;
  return problem.backend == Backend::kCuda ? cuda::forward_family(params, problem, family) : Status::Ok();
}

Status selected_kernels(const BackwardParams& params, KernelFamily* family) {
  if (family == nullptr) return Status::InvalidArgument("flashcore::selected_kernels: family: is null");
  detail::AttentionProblem problem;
  FLASHCORE_RETURN_IF_ERROR(detail::validate_backward(params, &problem));
  *family = KernelFamily::kAuto;
  return problem.backend == Backend::kCuda ? cuda::backward_family(params, problem, family) : Status::Ok();
}

}  // namespace flashcore
