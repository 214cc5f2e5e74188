// flashcore's CPU backends behind the Executor interface: the tiled flash backend
// (Backend::kCpu) or the float64 reference (Backend::kCpuReference), timed with std::chrono.
#include <chrono>
#include <cstdint>
#include <cstring>

#include "flashcore/attention.h"
#include "runner.h"
#include "varlen.h"

namespace flashcore::cli {
namespace {

using Clock = std::chrono::steady_clock;

class CpuExecutor final : public Executor {
 public:
  CpuExecutor(Backend backend, const Job& job) : backend_(backend), job_(job) {
    const Shape& s = job.shape;
    q_ = encode(job.inputs->q, job.dtype);
    k_ = encode(job.inputs->k, job.dtype);
    v_ = encode(job.inputs->v, job.dtype);
    out_.resize(q_.size());
    lse_.resize(static_cast<std::size_t>(s.lse_elements()));
    alibi_.assign(job.inputs->alibi_slopes.begin(), job.inputs->alibi_slopes.end());
    if (s.varlen()) {
      for (double offset : cu_seqlens(s.lengths_q)) cu_seqlens_q_.push_back(static_cast<std::int32_t>(offset));
      for (double offset : cu_seqlens(s.lengths_k)) cu_seqlens_k_.push_back(static_cast<std::int32_t>(offset));
    }
    if (job.backward) {
      dout_ = encode(job.inputs->dout, job.dtype);
      dq_.resize(q_.size());
      dk_.resize(k_.size());
      dv_.resize(k_.size());
    }
  }

  Status forward() override { return flashcore::forward(forward_params()); }
  Status backward() override { return flashcore::backward(backward_params()); }

  ForwardParams forward_params() {
    ForwardParams p;
    p.q = q_view(q_.data());
    p.k = kv_view(k_.data());
    p.v = kv_view(v_.data());
    p.out = q_view(out_.data());
    p.lse = lse_view();
    p.softmax_scale = softmax_scale(job_.shape);
    p.causal = job_.shape.causal;
    p.backend = backend_;
    p.num_threads = job_.threads;
    set_score_options(&p);
    return p;
  }

  // --window, --softcap, --alibi, --dropout, --varlen onto forward or backward params.
  template <class Params>
  void set_score_options(Params* p) {
    p->window_left = job_.shape.window_left;
    p->window_right = job_.shape.window_right;
    p->softcap = static_cast<float>(job_.shape.softcap);
    p->dropout_p = static_cast<float>(job_.shape.dropout_p);
    p->dropout_seed = job_.shape.dropout_seed;
    if (!alibi_.empty()) {
      p->alibi_slopes = make_view(alibi_.data(), DType::kFloat32, Device::kCPU, {job_.shape.batch, job_.shape.heads_q});
    }
    if (job_.shape.varlen()) {  // --varlen: the offsets, and seqlen_q / seqlen_k as the max_seqlen bounds
      p->cu_seqlens_q = make_view(cu_seqlens_q_.data(), DType::kInt32, Device::kCPU, {job_.shape.batch + 1});
      p->cu_seqlens_k = make_view(cu_seqlens_k_.data(), DType::kInt32, Device::kCPU, {job_.shape.batch + 1});
      p->max_seqlen_q = job_.shape.seqlen_q;
      p->max_seqlen_k = job_.shape.seqlen_k;
    }
  }

  BackwardParams backward_params() {
    BackwardParams p;
    p.q = q_view(q_.data());
    p.k = kv_view(k_.data());
    p.v = kv_view(v_.data());
    p.out = q_view(out_.data());
    p.dout = q_view(dout_.data());
    p.lse = lse_view();
    p.dq = q_view(dq_.data());
    p.dk = kv_view(dk_.data());
    p.dv = kv_view(dv_.data());
    p.softmax_scale = softmax_scale(job_.shape);
    p.causal = job_.shape.causal;
    p.deterministic = job_.deterministic;
    p.backend = backend_;
    p.num_threads = job_.threads;
    set_score_options(&p);
    return p;
  }

  Status synchronize() override { return Status::Ok(); }

  Status poison_outputs() override {
    // All-ones bytes are NaN in fp16, bf16 and fp32 alike.
    for (auto* buffer : {&out_, &dq_, &dk_, &dv_}) {
      if (!buffer->empty()) std::memset(buffer->data(), 0xFF, buffer->size());
    }
    std::memset(lse_.data(), 0xFF, lse_.size() * sizeof(float));
    return Status::Ok();
  }

  Status read_outputs(HostOutputs* o) override {
    const Shape& s = job_.shape;
    o->out = decode(out_.data(), job_.dtype, s.q_elements());
    o->lse = decode(lse_.data(), DType::kFloat32, s.lse_elements());
    if (job_.backward) {
      o->dq = decode(dq_.data(), job_.dtype, s.q_elements());
      o->dk = decode(dk_.data(), job_.dtype, s.kv_elements());
      o->dv = decode(dv_.data(), job_.dtype, s.kv_elements());
    }
    return Status::Ok();
  }

  Status begin_pass() override {
    start_ = Clock::now();
    return Status::Ok();
  }
  Status end_forward() override {
    forward_end_ = Clock::now();
    return Status::Ok();
  }
  Status end_pass(double* forward_ms, double* total_ms) override {
    const Clock::time_point end = Clock::now();
    *forward_ms = std::chrono::duration<double, std::milli>(forward_end_ - start_).count();
    *total_ms = std::chrono::duration<double, std::milli>(end - start_).count();
    return Status::Ok();
  }

  MemoryUse memory_use() override {
    if (backend_ == Backend::kCpuReference) {
      return {std::nullopt, "not estimated for the float64 reference (it holds float64 copies of every tensor)"};
    }
    std::size_t bytes = 0;
    const Status status = job_.backward ? host_scratch_bytes(backward_params(), &bytes)
                                        : host_scratch_bytes(forward_params(), &bytes);
    if (!status.ok()) return {std::nullopt, "not known: " + status.message()};
    return {bytes, "the CPU backend's per-thread tiles, as it reports them"};
  }

 private:
  // The dense (batch, seqlen, heads, head_dim) views, or with --varlen the packed (total, heads,
  // head_dim) ones and the (heads_q, total_q) LSE.
  TensorView q_view(void* data) const {
    const Shape& s = job_.shape;
    if (s.varlen()) return make_view(data, job_.dtype, Device::kCPU, {s.total_q(), s.heads_q, s.head_dim});
    return make_view(data, job_.dtype, Device::kCPU, {s.batch, s.seqlen_q, s.heads_q, s.head_dim});
  }
  TensorView kv_view(void* data) const {
    const Shape& s = job_.shape;
    if (s.varlen()) return make_view(data, job_.dtype, Device::kCPU, {s.total_k(), s.heads_kv, s.head_dim});
    return make_view(data, job_.dtype, Device::kCPU, {s.batch, s.seqlen_k, s.heads_kv, s.head_dim});
  }
  TensorView lse_view() {
    const Shape& s = job_.shape;
    if (s.varlen()) return make_view(lse_.data(), DType::kFloat32, Device::kCPU, {s.heads_q, s.total_q()});
    return make_view(lse_.data(), DType::kFloat32, Device::kCPU, {s.batch, s.heads_q, s.seqlen_q});
  }

  Backend backend_;
  Job job_;
  std::vector<std::byte> q_, k_, v_, dout_, out_, dq_, dk_, dv_;
  std::vector<float> lse_;
  std::vector<float> alibi_;  // (batch, heads_q) slopes; empty without --alibi
  std::vector<std::int32_t> cu_seqlens_q_, cu_seqlens_k_;  // (batch + 1) offsets; empty without --varlen
  Clock::time_point start_;
  Clock::time_point forward_end_;
};

}  // namespace

Status make_cpu_executor(const std::string& impl, const Job& job, std::unique_ptr<Executor>* executor) {
  const Backend backend = impl == "reference" ? Backend::kCpuReference : Backend::kCpu;
  *executor = std::make_unique<CpuExecutor>(backend, job);
  return Status::Ok();
}

}  // namespace flashcore::cli
