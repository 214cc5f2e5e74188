// flashcore::cuda::forward: checks what only the CUDA path needs (device, pointers), stages copies
// when the kernels cannot read the tensors in place (staging.h), fills the arch-neutral FwdParams
// and launches the kernel dispatch.cu picks.
#include "api/cuda_backend.h"
#include "cuda/device.h"
#include "cuda/dispatch.h"
#include "cuda/staging.h"

namespace flashcore::cuda {
namespace {

constexpr const char* kFn = "flashcore::forward";

TensorStrides strides_of(const TensorView& t) { return {t.stride[0], t.stride[1], t.stride[2]}; }

FwdParams make_params(const ForwardParams& params, const detail::AttentionProblem& p, const DeviceInfo& device) {
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
  if (p.varlen()) {  // sequences start at cu_seqlens rows, not batch strides (staged copies have some)
    kp.q_strides.batch = kp.k_strides.batch = kp.v_strides.batch = kp.o_strides.batch = kp.lse_strides.batch = 0;
  }
  return kp;
}

// The problem the kernels see and whether it runs on staged copies.
detail::AttentionProblem kernel_problem(const ForwardParams& params, const detail::AttentionProblem& p, bool* staged) {
  *staged = needs_staging(p, {&params.q, &params.k, &params.v, &params.out});
  return *staged ? staged_problem(p) : p;
}

// Varlen calls' packed tensors as (1, total, heads, head_dim) views (staging.h); dense calls'
// tensors as given (their rank-3 LSE is no packed tensor).
ForwardParams dense_views(const ForwardParams& params) {
  if (!params.cu_seqlens_q.present()) return params;
  ForwardParams d = params;
  for (TensorView* t : {&d.q, &d.k, &d.v, &d.out, &d.lse}) *t = packed_as_dense(*t);
  return d;
}

}  // namespace

Status forward(const ForwardParams& given, const detail::AttentionProblem& p) {
  DeviceInfo device;
  FLASHCORE_RETURN_IF_ERROR(current_device(kFn, &device));
  FLASHCORE_RETURN_IF_ERROR(check_device_pointers(
      kFn, device, {{"q", &given.q}, {"k", &given.k}, {"v", &given.v}, {"out", &given.out}, {"lse", &given.lse},
           {"alibi_slopes", &given.alibi_slopes}, {"cu_seqlens_q", &given.cu_seqlens_q},
           {"cu_seqlens_k", &given.cu_seqlens_k}}));
  const ForwardParams params = dense_views(given);
  bool staged = false;
  const detail::AttentionProblem kp = kernel_problem(params, p, &staged);
  const FwdKernel* kernel = nullptr;
  FLASHCORE_RETURN_IF_ERROR(select_forward_kernel(kFn, kp, params.kernels, device, &kernel));
  const auto stream = static_cast<cudaStream_t>(params.stream);
  if (!staged) return kernel->launch(make_params(params, kp, device), stream);

  StagingArea area(stream);
  ForwardParams s = params;
  FLASHCORE_RETURN_IF_ERROR(area.stage_input(params.q, kp.head_dim, &s.q));
  FLASHCORE_RETURN_IF_ERROR(area.stage_input(params.k, kp.head_dim, &s.k));
  FLASHCORE_RETURN_IF_ERROR(area.stage_input(params.v, kp.head_dim, &s.v));
  FLASHCORE_RETURN_IF_ERROR(area.stage_output(params.out, kp.head_dim, &s.out));
  FLASHCORE_RETURN_IF_ERROR(kernel->launch(make_params(s, kp, device), stream));
  return area.unstage(s.out, params.out);
}

Status forward_family(const ForwardParams& given, const detail::AttentionProblem& p, KernelFamily* family) {
  constexpr const char* kFamilyFn = "flashcore::selected_kernels";
  DeviceInfo device;
  FLASHCORE_RETURN_IF_ERROR(current_device(kFamilyFn, &device));
  bool staged = false;
  const FwdKernel* kernel = nullptr;
  const ForwardParams params = dense_views(given);
  FLASHCORE_RETURN_IF_ERROR(
      select_forward_kernel(kFamilyFn, kernel_problem(params, p, &staged), params.kernels, device, &kernel));
  *family = kernel->family;
  return Status::Ok();
}

}  // namespace flashcore::cuda
