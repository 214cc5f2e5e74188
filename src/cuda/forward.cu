// flashcore::cuda::forward: checks what only the CUDA path needs (device, pointers, alignment),
// fills the arch-neutral FwdParams and launches the kernel dispatch.cu picks.
#include <string>
#include <utility>

#include "api/cuda_backend.h"
#include "cuda/device.h"
#include "cuda/dispatch.h"

namespace flashcore::cuda {
namespace {

TensorStrides strides_of(const TensorView& t) { return {t.stride[0], t.stride[1], t.stride[2]}; }

}  // namespace

Status forward(const ForwardParams& params, const detail::AttentionProblem& p) {
  constexpr const char* kFn = "flashcore::forward";
  DeviceInfo device;
  FLASHCORE_RETURN_IF_ERROR(current_device(kFn, &device));
  FLASHCORE_RETURN_IF_ERROR(check_device_pointers(
      kFn, device, {{"q", &params.q}, {"k", &params.k}, {"v", &params.v}, {"out", &params.out}, {"lse", &params.lse}}));
  const FwdKernel* kernel = nullptr;
  FLASHCORE_RETURN_IF_ERROR(select_forward_kernel(kFn, p, params.kernels, device, &kernel));
  for (const auto& [name, tensor] : {std::pair{"q", &params.q}, {"k", &params.k}, {"v", &params.v}, {"out", &params.out}}) {
    FLASHCORE_RETURN_IF_ERROR(check_row_alignment(kFn, name, *tensor));
  }

  FwdParams kp;
  static_cast<ProblemParams&>(kp) = problem_params(p, device);
  kp.q = params.q.data;
  kp.k = params.k.data;
  kp.v = params.v.data;
  kp.out = params.out.data;
  kp.lse = static_cast<float*>(params.lse.data);
  kp.q_strides = strides_of(params.q);
  kp.k_strides = strides_of(params.k);
  kp.v_strides = strides_of(params.v);
  kp.o_strides = strides_of(params.out);
  if (params.lse.present()) kp.lse_strides = {params.lse.stride[0], params.lse.stride[1]};
  return kernel->launch(kp, static_cast<cudaStream_t>(params.stream));
}

Status forward_family(const ForwardParams& params, const detail::AttentionProblem& p, KernelFamily* family) {
  constexpr const char* kFn = "flashcore::selected_kernels";
  DeviceInfo device;
  FLASHCORE_RETURN_IF_ERROR(current_device(kFn, &device));
  const FwdKernel* kernel = nullptr;
  FLASHCORE_RETURN_IF_ERROR(select_forward_kernel(kFn, p, params.kernels, device, &kernel));
  *family = kernel->family;
  return Status::Ok();
}

}  // namespace flashcore::cuda
