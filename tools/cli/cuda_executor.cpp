// flashcore's CUDA kernels behind the Executor interface (CUDA builds only), and the check for a
// usable device that --device auto relies on.
#include "cuda_executor_base.h"
#include "flashcore/attention.h"
#include "varlen.h"

namespace flashcore::cli {
namespace {

class CudaExecutor final : public CudaExecutorBase {
 public:
  explicit CudaExecutor(const Job& job) : CudaExecutorBase(job, job.dtype) {}

  // Buffers first; then the backward's workspace, whose size depends on the views.
  Status prepare() {
    FLASHCORE_RETURN_IF_ERROR(init());
    if (!job_.inputs->alibi_slopes.empty()) {
      FLASHCORE_RETURN_IF_ERROR(alibi_.upload(encode(job_.inputs->alibi_slopes, DType::kFloat32), "alibi_slopes"));
    }
    if (job_.shape.varlen()) {
      FLASHCORE_RETURN_IF_ERROR(
          cu_seqlens_q_.upload(encode(cu_seqlens(job_.shape.lengths_q), DType::kInt32), "cu_seqlens_q"));
      FLASHCORE_RETURN_IF_ERROR(
          cu_seqlens_k_.upload(encode(cu_seqlens(job_.shape.lengths_k), DType::kInt32), "cu_seqlens_k"));
    }
    if (!job_.backward) return Status::Ok();
    std::size_t bytes = 0;
    FLASHCORE_RETURN_IF_ERROR(backward_workspace_size(backward_params(), &bytes));
    if (bytes > 0) FLASHCORE_RETURN_IF_ERROR(workspace_.allocate(bytes, "backward workspace"));
    extra_workspace_ = bytes;
    return Status::Ok();
  }

  Status forward() override { return flashcore::forward(forward_params()); }

  std::string kernels(bool backward) override {
    KernelFamily family = KernelFamily::kAuto;
    const Status status =
        backward ? selected_kernels(backward_params(), &family) : selected_kernels(forward_params(), &family);
    return status.ok() ? kernel_family_name(family) : "";
  }

 private:
  ForwardParams forward_params() const {
    ForwardParams p;
    p.q = q_view(q_);
    p.k = kv_view(k_);
    p.v = kv_view(v_);
    p.out = q_view(out_);
    p.lse = lse_view();
    p.softmax_scale = softmax_scale(job_.shape);
    p.causal = job_.shape.causal;
    p.backend = Backend::kCuda;
    p.kernels = job_.kernels;
    set_score_options(&p);
    return p;
  }

  // --window, --softcap, --alibi, --dropout, --varlen onto forward or backward params.
  template <class Params>
  void set_score_options(Params* p) const {
    p->window_left = job_.shape.window_left;
    p->window_right = job_.shape.window_right;
    p->softcap = static_cast<float>(job_.shape.softcap);
    p->dropout_p = static_cast<float>(job_.shape.dropout_p);
    p->dropout_seed = job_.shape.dropout_seed;
    if (alibi_.data() != nullptr) {
      p->alibi_slopes = make_view(alibi_.data(), DType::kFloat32, Device::kCUDA, {job_.shape.batch, job_.shape.heads_q});
    }
    if (job_.shape.varlen()) {  // --varlen: the offsets, and seqlen_q / seqlen_k as the max_seqlen bounds
      p->cu_seqlens_q = make_view(cu_seqlens_q_.data(), DType::kInt32, Device::kCUDA, {job_.shape.batch + 1});
      p->cu_seqlens_k = make_view(cu_seqlens_k_.data(), DType::kInt32, Device::kCUDA, {job_.shape.batch + 1});
      p->max_seqlen_q = job_.shape.seqlen_q;
      p->max_seqlen_k = job_.shape.seqlen_k;
    }
  }

 public:
  Status backward() override { return flashcore::backward(backward_params()); }

 private:
  BackwardParams backward_params() const {
    BackwardParams p;
    p.q = q_view(q_);
    p.k = kv_view(k_);
    p.v = kv_view(v_);
    p.out = q_view(out_);
    p.dout = q_view(dout_);
    p.lse = lse_view();
    p.dq = q_view(dq_);
    p.dk = kv_view(dk_);
    p.dv = kv_view(dv_);
    p.softmax_scale = softmax_scale(job_.shape);
    p.causal = job_.shape.causal;
    p.deterministic = job_.deterministic;
    p.backend = Backend::kCuda;
    p.kernels = job_.kernels;
    p.workspace = workspace_.data();
    p.workspace_bytes = workspace_.bytes();
    set_score_options(&p);
    return p;
  }

  // The dense (batch, seqlen, heads, head_dim) views, or with --varlen the packed (total, heads,
  // head_dim) ones and the (heads_q, total_q) LSE.
  TensorView q_view(const DeviceBuffer& b) const {
    const Shape& s = job_.shape;
    if (s.varlen()) return make_view(b.data(), element_, Device::kCUDA, {s.total_q(), s.heads_q, s.head_dim});
    return make_view(b.data(), element_, Device::kCUDA, {s.batch, s.seqlen_q, s.heads_q, s.head_dim});
  }
  TensorView kv_view(const DeviceBuffer& b) const {
    const Shape& s = job_.shape;
    if (s.varlen()) return make_view(b.data(), element_, Device::kCUDA, {s.total_k(), s.heads_kv, s.head_dim});
    return make_view(b.data(), element_, Device::kCUDA, {s.batch, s.seqlen_k, s.heads_kv, s.head_dim});
  }
  TensorView lse_view() const {
    const Shape& s = job_.shape;
    if (s.varlen()) return make_view(lse_.data(), DType::kFloat32, Device::kCUDA, {s.heads_q, s.total_q()});
    return make_view(lse_.data(), DType::kFloat32, Device::kCUDA, {s.batch, s.heads_q, s.seqlen_q});
  }

  DeviceBuffer workspace_;
  DeviceBuffer alibi_;  // (batch, heads_q) float32 slopes, with --alibi
  DeviceBuffer cu_seqlens_q_, cu_seqlens_k_;  // (batch + 1) int32 offsets, with --varlen
};

}  // namespace

bool cuda_device_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

std::string cuda_device_name() {
  int device = 0;
  cudaDeviceProp props;
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&props, device) != cudaSuccess) return "GPU";
  return props.name;
}

Status make_cuda_executor(const Job& job, std::unique_ptr<Executor>* executor) {
  auto cuda = std::make_unique<CudaExecutor>(job);
  FLASHCORE_RETURN_IF_ERROR(cuda->prepare());
  *executor = std::move(cuda);
  return Status::Ok();
}

}  // namespace flashcore::cli
