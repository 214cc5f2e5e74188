// flashcore::cuda::backward and backward_workspace_size: check what only the CUDA path needs
// (device, pointers), size the chosen kernel's workspace (allocating it on the stream when the
// caller gave none), stage copies when the kernels cannot read the tensors in place (staging.h),
// fill the arch-neutral BwdParams and launch.
#include <cstdint>
#include <string>
#include <utility>

#include "api/cuda_backend.h"
#include "cuda/common/cuda_check.h"
#include "cuda/device.h"
#include "cuda/dispatch.h"
#include "cuda/staging.h"

namespace flashcore::cuda {
namespace {

constexpr const char* kFn = "flashcore::backward";

TensorStrides strides_of(const TensorView& t) { return {t.stride[0], t.stride[1], t.stride[2]}; }

// Everything but the workspace pointers.
BwdParams make_params(const BackwardParams& params, const detail::AttentionProblem& p, const DeviceInfo& device) {
  BwdParams kp;
  static_cast<ProblemParams&>(kp) = problem_params(p, device);
  kp.q = params.q.data;
  kp.k = params.k.data;
  kp.v = params.v.data;
  kp.out = params.out.data;
  kp.dout = params.dout.data;
  kp.lse = static_cast<const float*>(params.lse.data);
  kp.dq = params.dq.data;
  kp.dk = params.dk.data;
  kp.dv = params.dv.data;
  kp.q_strides = strides_of(params.q);
  kp.k_strides = strides_of(params.k);
  kp.v_strides = strides_of(params.v);
  kp.o_strides = strides_of(params.out);
  kp.do_strides = strides_of(params.dout);
  kp.dq_strides = strides_of(params.dq);
  kp.dk_strides = strides_of(params.dk);
  kp.dv_strides = strides_of(params.dv);
  kp.lse_strides = {params.lse.stride[0], params.lse.stride[1]};
  kp.deterministic = params.deterministic;
  if (p.varlen()) {  // sequences start at cu_seqlens rows, not batch strides (staged copies have some)
    kp.q_strides.batch = kp.k_strides.batch = kp.v_strides.batch = kp.o_strides.batch = kp.do_strides.batch = 0;
    kp.dq_strides.batch = kp.dk_strides.batch = kp.dv_strides.batch = kp.lse_strides.batch = 0;
  }
  return kp;
}

// The problem the kernels see and whether it runs on staged copies.
detail::AttentionProblem kernel_problem(const BackwardParams& params, const detail::AttentionProblem& p, bool* staged) {
  *staged = needs_staging(p, {&params.q, &params.k, &params.v, &params.out, &params.dout, &params.dq, &params.dk,
                              &params.dv});
  return *staged ? staged_problem(p) : p;
}

// Varlen calls' packed tensors as (1, total, heads, head_dim) views (staging.h); dense calls'
// tensors as given (their rank-3 LSE is no packed tensor).
BackwardParams dense_views(const BackwardParams& params) {
  if (!params.cu_seqlens_q.present()) return params;
  BackwardParams d = params;
  for (TensorView* t : {&d.q, &d.k, &d.v, &d.out, &d.dout, &d.lse, &d.dq, &d.dk, &d.dv}) *t = packed_as_dense(*t);
  return d;
}

// Launches on the given workspace (the caller's, or one from the stream-ordered allocator).
Status launch(const BwdKernel& kernel, const BackwardParams& params, const detail::AttentionProblem& kp,
              const DeviceInfo& device, const BwdWorkspace& workspace, void* buffer, cudaStream_t stream) {
  BwdParams bp = make_params(params, kp, device);
  workspace.carve(buffer, &bp);
  return kernel.launch(bp, stream);
}

}  // namespace

Status backward_workspace_size(const BackwardParams& given, const detail::AttentionProblem& p, std::size_t* bytes) {
  constexpr const char* kSizeFn = "flashcore::backward_workspace_size";
  DeviceInfo device;
  FLASHCORE_RETURN_IF_ERROR(current_device(kSizeFn, &device));
  const BackwardParams params = dense_views(given);
  bool staged = false;
  const detail::AttentionProblem kp = kernel_problem(params, p, &staged);
  const BwdKernel* kernel = nullptr;
  FLASHCORE_RETURN_IF_ERROR(select_backward_kernel(kSizeFn, kp, params.kernels, device, &kernel));
  *bytes = kernel->workspace(make_params(params, kp, device), kernel->head_dim).total_bytes;
  return Status::Ok();
}

Status backward(const BackwardParams& given, const detail::AttentionProblem& p) {
  DeviceInfo device;
  FLASHCORE_RETURN_IF_ERROR(current_device(kFn, &device));
  TensorView workspace_view;
  workspace_view.data = given.workspace;
  FLASHCORE_RETURN_IF_ERROR(check_device_pointers(
      kFn, device,
      {{"q", &given.q}, {"k", &given.k}, {"v", &given.v}, {"out", &given.out}, {"dout", &given.dout},
       {"lse", &given.lse}, {"dq", &given.dq}, {"dk", &given.dk}, {"dv", &given.dv},
       {"workspace", &workspace_view}, {"alibi_slopes", &given.alibi_slopes},
       {"cu_seqlens_q", &given.cu_seqlens_q}, {"cu_seqlens_k", &given.cu_seqlens_k}}));
  const BackwardParams params = dense_views(given);
  bool staged = false;
  const detail::AttentionProblem kp = kernel_problem(params, p, &staged);
  const BwdKernel* kernel = nullptr;
  FLASHCORE_RETURN_IF_ERROR(select_backward_kernel(kFn, kp, params.kernels, device, &kernel));
  const BwdWorkspace workspace = kernel->workspace(make_params(params, kp, device), kernel->head_dim);
  if (params.workspace != nullptr) {
    if (params.workspace_bytes < workspace.total_bytes) {
      return Status::InvalidArgument(std::string(kFn) + ": workspace: workspace_bytes is " +
                                     std::to_string(params.workspace_bytes) + " but these params need " +
                                     std::to_string(workspace.total_bytes) + " (see backward_workspace_size)");
    }
    if (reinterpret_cast<std::uintptr_t>(params.workspace) % 16 != 0) {
      return Status::InvalidArgument(std::string(kFn) + ": workspace: must be 16-byte aligned");
    }
  }

  const auto stream = static_cast<cudaStream_t>(params.stream);
  StagingArea area(stream);
  BackwardParams s = params;
  if (staged) {
    FLASHCORE_RETURN_IF_ERROR(area.stage_input(params.q, kp.head_dim, &s.q));
    FLASHCORE_RETURN_IF_ERROR(area.stage_input(params.k, kp.head_dim, &s.k));
    FLASHCORE_RETURN_IF_ERROR(area.stage_input(params.v, kp.head_dim, &s.v));
    FLASHCORE_RETURN_IF_ERROR(area.stage_input(params.out, kp.head_dim, &s.out));
    FLASHCORE_RETURN_IF_ERROR(area.stage_input(params.dout, kp.head_dim, &s.dout));
    FLASHCORE_RETURN_IF_ERROR(area.stage_output(params.dq, kp.head_dim, &s.dq));
    FLASHCORE_RETURN_IF_ERROR(area.stage_output(params.dk, kp.head_dim, &s.dk));
    FLASHCORE_RETURN_IF_ERROR(area.stage_output(params.dv, kp.head_dim, &s.dv));
  }
  if (params.workspace != nullptr) {
    FLASHCORE_RETURN_IF_ERROR(launch(*kernel, s, kp, device, workspace, params.workspace, stream));
  } else {
    // No workspace given: borrow one from the stream-ordered allocator; it is freed on the same
    // stream after the last kernel, also when a launch failed.
    void* buffer = nullptr;
    FLASHCORE_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&buffer, workspace.total_bytes, stream));
    const Status status = launch(*kernel, s, kp, device, workspace, buffer, stream);
    const Status freed = cuda_status(cudaFreeAsync(buffer, stream), "cudaFreeAsync(workspace)");
    FLASHCORE_RETURN_IF_ERROR(status.ok() ? freed : status);
  }
  if (!staged) return Status::Ok();
  FLASHCORE_RETURN_IF_ERROR(area.unstage(s.dq, params.dq));
  FLASHCORE_RETURN_IF_ERROR(area.unstage(s.dk, params.dk));
  return area.unstage(s.dv, params.dv);
}

Status backward_family(const BackwardParams& given, const detail::AttentionProblem& p, KernelFamily* family) {
  constexpr const char* kFamilyFn = "flashcore::selected_kernels";
  DeviceInfo device;
  FLASHCORE_RETURN_IF_ERROR(current_device(kFamilyFn, &device));
  const BackwardParams params = dense_views(given);
  bool staged = false;
  const BwdKernel* kernel = nullptr;
  FLASHCORE_RETURN_IF_ERROR(
      select_backward_kernel(kFamilyFn, kernel_problem(params, p, &staged), params.kernels, device, &kernel));
  *family = kernel->family;
  return Status::Ok();
}

// See bwd_workspace.h.
BwdWorkspace BwdWorkspace::plan(const ProblemParams& p, int seqlen_q_rounding, int head_dim_rounded, int num_splits) {
  const auto align = [](std::size_t bytes) { return (bytes + 255) / 256 * 256; };
  BwdWorkspace w;
  w.seqlen_q_rounded = (p.seqlen_q + seqlen_q_rounding - 1) / seqlen_q_rounding * seqlen_q_rounding;
  w.num_splits = num_splits;
  const std::int64_t rows = static_cast<std::int64_t>(p.batch) * p.heads_q * w.seqlen_q_rounded;
  w.dq_accum_split_elems = rows * head_dim_rounded;
  w.lse_log2_offset = 0;
  w.dsum_offset = align(static_cast<std::size_t>(rows) * sizeof(float));
  w.dq_accum_offset = w.dsum_offset + align(static_cast<std::size_t>(rows) * sizeof(float));
  w.total_bytes = w.dq_accum_offset + static_cast<std::size_t>(num_splits) *
                                          static_cast<std::size_t>(w.dq_accum_split_elems) * sizeof(float);
  return w;
}

void BwdWorkspace::add_varlen_work(int entries) {
  total_bytes = (total_bytes + 255) / 256 * 256;
  varlen_work_offset = total_bytes;
  varlen_work_entries = entries;
  total_bytes += static_cast<std::size_t>(entries) * 2 * sizeof(int);
}

void BwdWorkspace::carve(void* base, BwdParams* params) const {
  char* bytes = static_cast<char*>(base);
  params->lse_log2 = reinterpret_cast<float*>(bytes + lse_log2_offset);
  params->dsum = reinterpret_cast<float*>(bytes + dsum_offset);
  params->dq_accum = reinterpret_cast<float*>(bytes + dq_accum_offset);
  params->dq_accum_split_stride = dq_accum_split_elems;
  params->varlen_work = varlen_work_entries > 0 ? reinterpret_cast<int*>(bytes + varlen_work_offset) : nullptr;
  params->seqlen_q_rounded = seqlen_q_rounded;
  params->num_splits = num_splits;
}

}  // namespace flashcore::cuda
