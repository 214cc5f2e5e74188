// Running and judging one fuzz problem (fuzz_check.h).
#include "fuzz_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <new>
#include <string>
#include <tuple>
#include <vector>

#include "flashcore/accuracy.h"
#include "flashcore/reference.h"

namespace flashcore::cli {
namespace {

using std::int64_t;

// One tensor of the problem: its host image (values at the view's elements, NaN everywhere else)
// and its storage on the target device.
class FuzzTensor {
 public:
  // A (d0, d1, d2, d3) tensor in `layout`, or with rank 3 the contiguous (batch, heads, seqlen) LSE.
  FuzzTensor(DType dtype, const TensorLayout& layout, std::initializer_list<int64_t> shape) : dtype_(dtype) {
    rank_ = static_cast<int>(shape.size());
    std::copy(shape.begin(), shape.end(), shape_);
    if (rank_ == 4) {
      layout_strides(layout, shape_[0], shape_[1], shape_[2], shape_[3], strides_, &storage_elements_);
    } else {
      strides_[2] = 1;
      strides_[1] = shape_[2];
      strides_[0] = shape_[1] * shape_[2];
      storage_elements_ = shape_[0] * strides_[0];
    }
    host_.assign(static_cast<size_t>(storage_elements_) * dtype_size(dtype_), std::byte{0xFF});  // poisoned
  }

  // Element offsets of the view in row-major logical order.
  std::vector<int64_t> offsets() const {
    std::vector<int64_t> result;
    result.reserve(static_cast<size_t>(numel()));
    const int64_t d3 = rank_ == 4 ? shape_[3] : 1;
    for (int64_t i0 = 0; i0 < shape_[0]; ++i0)
      for (int64_t i1 = 0; i1 < shape_[1]; ++i1)
        for (int64_t i2 = 0; i2 < shape_[2]; ++i2)
          for (int64_t i3 = 0; i3 < d3; ++i3)
            result.push_back(i0 * strides_[0] + i1 * strides_[1] + i2 * strides_[2] + i3);
    return result;
  }
  int64_t numel() const { return shape_[0] * shape_[1] * shape_[2] * (rank_ == 4 ? shape_[3] : 1); }

  void set_values(const std::vector<double>& values) {
    const std::vector<std::byte> encoded = encode(values, dtype_);
    const size_t size = dtype_size(dtype_);
    const std::vector<int64_t> at = offsets();
    for (size_t i = 0; i < at.size(); ++i) {
      std::memcpy(&host_[static_cast<size_t>(at[i]) * size], &encoded[i * size], size);
    }
  }

  std::vector<double> values() const {
    const size_t size = dtype_size(dtype_);
    const std::vector<int64_t> at = offsets();
    std::vector<std::byte> packed(at.size() * size);
    for (size_t i = 0; i < at.size(); ++i) {
      std::memcpy(&packed[i * size], &host_[static_cast<size_t>(at[i]) * size], size);
    }
    return decode(packed.data(), dtype_, static_cast<int64_t>(at.size()));
  }

  // Whether every storage element outside the view still holds the all-ones NaN it started with.
  bool outside_view_untouched() const {
    std::vector<bool> in_view(static_cast<size_t>(storage_elements_), false);
    for (int64_t offset : offsets()) in_view[static_cast<size_t>(offset)] = true;
    const size_t size = dtype_size(dtype_);
    for (size_t e = 0; e < in_view.size(); ++e) {
      if (in_view[e]) continue;
      for (size_t b = 0; b < size; ++b) {
        if (host_[e * size + b] != std::byte{0xFF}) return false;
      }
    }
    return true;
  }

  // The whole storage, view and padding, as last copied from (or to) the device.
  const std::vector<std::byte>& host_bytes() const { return host_; }
  // All-ones bytes everywhere again: a NaN in fp16, bf16 and fp32 alike.
  void poison() { std::fill(host_.begin(), host_.end(), std::byte{0xFF}); }

  Status to_device(FuzzMemory& memory) {
    if (!storage_) {
      const Status status = memory.allocate(host_.size(), &storage_);
      if (!status.ok()) return status;
    }
    return storage_->upload(host_.data(), host_.size());
  }
  Status from_device() { return storage_->download(host_.data(), host_.size()); }

  TensorView view(Device device) const {
    TensorView v;
    v.data = storage_ ? storage_->data() : nullptr;
    v.dtype = dtype_;
    v.device = device;
    v.rank = rank_;
    for (int d = 0; d < rank_; ++d) {
      v.shape[d] = shape_[d];
      v.stride[d] = strides_[d];
    }
    return v;
  }

 private:
  DType dtype_;
  int rank_ = 4;
  int64_t shape_[4] = {};
  int64_t strides_[4] = {};
  int64_t storage_elements_ = 0;
  std::vector<std::byte> host_;
  std::unique_ptr<DeviceStorage> storage_;
};

// The outcome of a library call: kNotSupported skips the problem, any other error fails it.
bool call_failed(const Status& status, const char* what, ProblemResult* result) {
  if (status.ok()) return false;
  result->verdict = status.code() == StatusCode::kNotSupported ? Verdict::kSkipped : Verdict::kFailed;
  result->device_error = status.code() == StatusCode::kCudaError;
  result->message = std::string(what) + ": " + status.message();
  return true;
}

void fail(ProblemResult* result, const std::string& message) {
  result->verdict = Verdict::kFailed;
  result->message += (result->message.empty() ? "" : "; ") + message;
}

// Compares with the accuracy rule and records a failure.
void judge(const char* name, DType dtype, double factor, const std::vector<double>& got,
           const std::vector<double>& baseline, const std::vector<double>& reference, ProblemResult* result,
           double extra = 0.0) {
  const accuracy::Comparison c = accuracy::compare_to_reference(name, dtype, factor, got, baseline, reference, extra);
  if (!c.ok) fail(result, c.message);
}

ProblemResult run_checked(const FuzzProblem& problem, const FuzzTarget& target) {
  ProblemResult result;
  const Shape& s = problem.shape;
  const DType dtype = problem.dtype;
  FuzzMemory& memory = *target.memory;
  const Device device = memory.device();
  const HostInputs inputs = make_inputs(s, dtype, problem.backward, problem.input_seed);

  FuzzTensor q(dtype, problem.inputs, {s.batch, s.seqlen_q, s.heads_q, s.head_dim});
  FuzzTensor k(dtype, problem.inputs, {s.batch, s.seqlen_k, s.heads_kv, s.head_dim});
  FuzzTensor v(dtype, problem.inputs, {s.batch, s.seqlen_k, s.heads_kv, s.head_dim});
  FuzzTensor out(dtype, problem.outputs, {s.batch, s.seqlen_q, s.heads_q, s.head_dim});
  FuzzTensor lse(DType::kFloat32, TensorLayout{}, {s.batch, s.heads_q, s.seqlen_q});
  q.set_values(inputs.q);
  k.set_values(inputs.k);
  v.set_values(inputs.v);
  for (FuzzTensor* t : {&q, &k, &v, &out, &lse}) {
    if (call_failed(t->to_device(memory), "copy to the device", &result)) return result;
  }
  // ALiBi slopes: contiguous float32 (batch, heads_q), stored as a (1, batch, heads_q) tensor.
  FuzzTensor slopes(DType::kFloat32, TensorLayout{}, {1, s.batch, s.heads_q});
  TensorView slopes_view;
  if (s.alibi) {
    slopes.set_values(inputs.alibi_slopes);
    if (call_failed(slopes.to_device(memory), "copy to the device", &result)) return result;
    slopes_view = slopes.view(device);
    slopes_view.rank = 2;
    slopes_view.shape[0] = s.batch;
    slopes_view.shape[1] = s.heads_q;
    slopes_view.stride[0] = s.heads_q;
    slopes_view.stride[1] = 1;
  }

  ForwardParams fwd;
  fwd.q = q.view(device);
  fwd.k = k.view(device);
  fwd.v = v.view(device);
  fwd.out = out.view(device);
  fwd.lse = lse.view(device);
  fwd.softmax_scale = softmax_scale(s);
  fwd.causal = s.causal;
  fwd.backend = device == Device::kCPU ? Backend::kCpu : Backend::kCuda;
  fwd.kernels = target.kernels;
  fwd.num_threads = target.threads;
  fwd.window_left = s.window_left;
  fwd.window_right = s.window_right;
  fwd.softcap = static_cast<float>(s.softcap);
  fwd.alibi_slopes = slopes_view;
  fwd.dropout_p = static_cast<float>(s.dropout_p);
  fwd.dropout_seed = s.dropout_seed;
  if (call_failed(forward(fwd), "forward", &result)) return result;
  if (call_failed(memory.synchronize(), "forward", &result)) return result;
  for (FuzzTensor* t : {&out, &lse}) {
    if (call_failed(t->from_device(), "copy to the host", &result)) return result;
  }

  ReferenceProblem p;
  p.batch = s.batch;
  p.seqlen_q = s.seqlen_q;
  p.seqlen_k = s.seqlen_k;
  p.heads_q = s.heads_q;
  p.heads_kv = s.heads_kv;
  p.head_dim = s.head_dim;
  p.softmax_scale = *fwd.softmax_scale;
  p.causal = s.causal;
  p.window_left = s.window_left;
  p.window_right = s.window_right;
  p.softcap = fwd.softcap;  // the float the library was given
  p.dropout_p = fwd.dropout_p;
  p.dropout_seed = fwd.dropout_seed;
  if (s.alibi) {
    p.alibi_slopes = inputs.alibi_slopes.data();
    p.alibi_slopes_per_batch = true;
  }
  std::vector<double> ref_out(inputs.q.size()), ref_lse(static_cast<size_t>(s.lse_elements()));
  if (call_failed(reference_forward(p, inputs.q.data(), inputs.k.data(), inputs.v.data(), ref_out.data(),
                                    ref_lse.data(), target.threads),
                  "reference", &result)) {
    return result;
  }
  const accuracy::BaselineForward base =
      accuracy::baseline_forward(p, dtype, inputs.q, inputs.k, inputs.v, target.threads);
  judge("out", dtype, 2.0, out.values(), base.out, ref_out, &result);
  judge("lse", DType::kFloat32, 2.0, lse.values(), base.lse, ref_lse, &result);
  if (!out.outside_view_untouched()) fail(&result, "out: written outside its view");
  if (!problem.backward || result.verdict == Verdict::kFailed) return result;

  FuzzTensor dout(dtype, problem.inputs, {s.batch, s.seqlen_q, s.heads_q, s.head_dim});
  FuzzTensor dq(dtype, problem.outputs, {s.batch, s.seqlen_q, s.heads_q, s.head_dim});
  FuzzTensor dk(dtype, problem.outputs, {s.batch, s.seqlen_k, s.heads_kv, s.head_dim});
  FuzzTensor dv(dtype, problem.outputs, {s.batch, s.seqlen_k, s.heads_kv, s.head_dim});
  dout.set_values(inputs.dout);
  for (FuzzTensor* t : {&dout, &dq, &dk, &dv}) {
    if (call_failed(t->to_device(memory), "copy to the device", &result)) return result;
  }
  BackwardParams bwd;
  bwd.q = fwd.q;
  bwd.k = fwd.k;
  bwd.v = fwd.v;
  bwd.out = fwd.out;  // the forward's own out and LSE, as FlashAttention's tests do
  bwd.lse = fwd.lse;
  bwd.dout = dout.view(device);
  bwd.dq = dq.view(device);
  bwd.dk = dk.view(device);
  bwd.dv = dv.view(device);
  bwd.softmax_scale = fwd.softmax_scale;
  bwd.causal = s.causal;
  bwd.backend = fwd.backend;
  bwd.kernels = target.kernels;
  bwd.num_threads = target.threads;
  bwd.window_left = fwd.window_left;
  bwd.window_right = fwd.window_right;
  bwd.softcap = fwd.softcap;
  bwd.alibi_slopes = fwd.alibi_slopes;
  bwd.dropout_p = fwd.dropout_p;
  bwd.dropout_seed = fwd.dropout_seed;
  bwd.deterministic = problem.deterministic;
  if (call_failed(backward(bwd), "backward", &result)) return result;
  if (call_failed(memory.synchronize(), "backward", &result)) return result;
  for (FuzzTensor* t : {&dq, &dk, &dv}) {
    if (call_failed(t->from_device(), "copy to the host", &result)) return result;
  }
  if (problem.deterministic) {  // the promise is bit-identical gradients run after run: run again
    const std::vector<std::byte> first_dq = dq.host_bytes(), first_dk = dk.host_bytes(), first_dv = dv.host_bytes();
    for (FuzzTensor* t : {&dq, &dk, &dv}) {
      t->poison();
      if (call_failed(t->to_device(memory), "copy to the device", &result)) return result;
    }
    if (call_failed(backward(bwd), "backward (second deterministic run)", &result)) return result;
    if (call_failed(memory.synchronize(), "backward (second deterministic run)", &result)) return result;
    for (FuzzTensor* t : {&dq, &dk, &dv}) {
      if (call_failed(t->from_device(), "copy to the host", &result)) return result;
    }
    if (dq.host_bytes() != first_dq) fail(&result, "dq: deterministic backward differs between two runs");
    if (dk.host_bytes() != first_dk) fail(&result, "dk: deterministic backward differs between two runs");
    if (dv.host_bytes() != first_dv) fail(&result, "dv: deterministic backward differs between two runs");
  }

  std::vector<double> ref_dq(inputs.q.size()), ref_dk(inputs.k.size()), ref_dv(inputs.v.size());
  if (call_failed(reference_backward(p, inputs.q.data(), inputs.k.data(), inputs.v.data(), inputs.dout.data(),
                                     ref_dq.data(), ref_dk.data(), ref_dv.data(), target.threads),
                  "reference", &result)) {
    return result;
  }
  const accuracy::BaselineBackward base_bwd =
      accuracy::baseline_backward(p, dtype, inputs.q, inputs.k, inputs.v, inputs.dout, target.threads);
  // FlashAttention's row sums D = rowsum(dO * O) come from the O the backward was given: the rule
  // allows dq and dk what that adds (accuracy.h), which matters where rows see one to a few keys.
  const accuracy::RowSumAllowance row_sums =
      accuracy::row_sum_allowance(p, dtype, inputs.q, inputs.k, inputs.v, out.values(), inputs.dout, target.threads);
  judge("dq", dtype, 3.0, dq.values(), base_bwd.dq, ref_dq, &result, row_sums.dq);
  judge("dk", dtype, 3.0, dk.values(), base_bwd.dk, ref_dk, &result, row_sums.dk);
  judge("dv", dtype, 3.0, dv.values(), base_bwd.dv, ref_dv, &result);
  if (!dq.outside_view_untouched()) fail(&result, "dq: written outside its view");
  if (!dk.outside_view_untouched()) fail(&result, "dk: written outside its view");
  if (!dv.outside_view_untouched()) fail(&result, "dv: written outside its view");
  return result;
}

}  // namespace

ProblemResult check_problem(const FuzzProblem& problem, const FuzzTarget& target) {
  try {
    return run_checked(problem, target);
  } catch (const std::bad_alloc&) {
    ProblemResult result;
    fail(&result, "out of host memory for this problem (lower --max-elements)");
    return result;
  }
}

}  // namespace flashcore::cli
