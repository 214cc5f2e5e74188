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
#include "varlen.h"

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

// With --varlen a tensor is built as (1, total, heads, head_dim) (or the LSE as (1, heads, total))
// and given to the library as (total, heads, head_dim) / (heads, total): its leading 1 dropped.
TensorView packed(TensorView view) {
  for (int d = 1; d < view.rank; ++d) {
    view.shape[d - 1] = view.shape[d];
    view.stride[d - 1] = view.stride[d];
  }
  --view.rank;
  return view;
}

// What the outputs are judged against: the float64 reference and the same-precision baseline,
// computed on the whole dense batch, or (varlen) per sequence and packed back.
struct ForwardExpected {
  std::vector<double> ref_out, ref_lse, base_out, base_lse;
};
struct BackwardExpected {
  std::vector<double> ref_dq, ref_dk, ref_dv, base_dq, base_dk, base_dv;
  accuracy::RowSumAllowance row_sums;  // the largest over the sequences
};

Status expect_forward(const Shape& s, const ReferenceProblem& whole, DType dtype, const HostInputs& in, int threads,
                      ForwardExpected* e) {
  e->ref_out.assign(in.q.size(), 0.0);
  e->ref_lse.assign(static_cast<size_t>(s.lse_elements()), 0.0);
  if (!s.varlen()) {
    FLASHCORE_RETURN_IF_ERROR(
        reference_forward(whole, in.q.data(), in.k.data(), in.v.data(), e->ref_out.data(), e->ref_lse.data(), threads));
    accuracy::BaselineForward base = accuracy::baseline_forward(whole, dtype, in.q, in.k, in.v, threads);
    e->base_out = std::move(base.out);
    e->base_lse = std::move(base.lse);
    return Status::Ok();
  }
  e->base_out = e->ref_out;
  e->base_lse = e->ref_lse;
  const int64_t q_width = s.heads_q * s.head_dim, kv_width = s.heads_kv * s.head_dim;
  for (const Sequence& seq : sequences(s)) {
    if (seq.len_q == 0) continue;
    if (seq.len_k == 0) {  // rows without keys: out 0, LSE -inf (attention.h)
      const std::vector<double> none(static_cast<size_t>(s.heads_q * seq.len_q), -INFINITY);
      put_lse(none, seq, s.heads_q, s.total_q(), &e->ref_lse);
      put_lse(none, seq, s.heads_q, s.total_q(), &e->base_lse);
      continue;
    }
    const ReferenceProblem p = sequence_problem(whole, seq, in);
    const std::vector<double> q = take_rows(in.q, seq.q_row, seq.len_q, q_width);
    const std::vector<double> k = take_rows(in.k, seq.k_row, seq.len_k, kv_width);
    const std::vector<double> v = take_rows(in.v, seq.k_row, seq.len_k, kv_width);
    std::vector<double> out(q.size()), lse(static_cast<size_t>(s.heads_q * seq.len_q));
    FLASHCORE_RETURN_IF_ERROR(reference_forward(p, q.data(), k.data(), v.data(), out.data(), lse.data(), threads));
    put_rows(out, seq.q_row, q_width, &e->ref_out);
    put_lse(lse, seq, s.heads_q, s.total_q(), &e->ref_lse);
    const accuracy::BaselineForward base = accuracy::baseline_forward(p, dtype, q, k, v, threads);
    put_rows(base.out, seq.q_row, q_width, &e->base_out);
    put_lse(base.lse, seq, s.heads_q, s.total_q(), &e->base_lse);
  }
  return Status::Ok();
}

// `out`: the forward's output as the backward was given it (packed like q).
Status expect_backward(const Shape& s, const ReferenceProblem& whole, DType dtype, const HostInputs& in,
                       const std::vector<double>& out, int threads, BackwardExpected* e) {
  e->ref_dq.assign(in.q.size(), 0.0);
  e->ref_dk.assign(in.k.size(), 0.0);
  e->ref_dv.assign(in.v.size(), 0.0);
  if (!s.varlen()) {
    FLASHCORE_RETURN_IF_ERROR(reference_backward(whole, in.q.data(), in.k.data(), in.v.data(), in.dout.data(),
                                                 e->ref_dq.data(), e->ref_dk.data(), e->ref_dv.data(), threads));
    accuracy::BaselineBackward base = accuracy::baseline_backward(whole, dtype, in.q, in.k, in.v, in.dout, threads);
    e->base_dq = std::move(base.dq);
    e->base_dk = std::move(base.dk);
    e->base_dv = std::move(base.dv);
    e->row_sums = accuracy::row_sum_allowance(whole, dtype, in.q, in.k, in.v, out, in.dout, threads);
    return Status::Ok();
  }
  e->base_dq = e->ref_dq;  // sequences without queries or keys have zero gradients
  e->base_dk = e->ref_dk;
  e->base_dv = e->ref_dv;
  const int64_t q_width = s.heads_q * s.head_dim, kv_width = s.heads_kv * s.head_dim;
  for (const Sequence& seq : sequences(s)) {
    if (seq.len_q == 0 || seq.len_k == 0) continue;
    const ReferenceProblem p = sequence_problem(whole, seq, in);
    const std::vector<double> q = take_rows(in.q, seq.q_row, seq.len_q, q_width);
    const std::vector<double> k = take_rows(in.k, seq.k_row, seq.len_k, kv_width);
    const std::vector<double> v = take_rows(in.v, seq.k_row, seq.len_k, kv_width);
    const std::vector<double> dout = take_rows(in.dout, seq.q_row, seq.len_q, q_width);
    std::vector<double> dq(q.size()), dk(k.size()), dv(v.size());
    FLASHCORE_RETURN_IF_ERROR(
        reference_backward(p, q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(), dv.data(), threads));
    put_rows(dq, seq.q_row, q_width, &e->ref_dq);
    put_rows(dk, seq.k_row, kv_width, &e->ref_dk);
    put_rows(dv, seq.k_row, kv_width, &e->ref_dv);
    const accuracy::BaselineBackward base = accuracy::baseline_backward(p, dtype, q, k, v, dout, threads);
    put_rows(base.dq, seq.q_row, q_width, &e->base_dq);
    put_rows(base.dk, seq.k_row, kv_width, &e->base_dk);
    put_rows(base.dv, seq.k_row, kv_width, &e->base_dv);
    const accuracy::RowSumAllowance row_sums =
        accuracy::row_sum_allowance(p, dtype, q, k, v, take_rows(out, seq.q_row, seq.len_q, q_width), dout, threads);
    e->row_sums.dq = std::max(e->row_sums.dq, row_sums.dq);
    e->row_sums.dk = std::max(e->row_sums.dk, row_sums.dk);
  }
  return Status::Ok();
}

ProblemResult run_checked(const FuzzProblem& problem, const FuzzTarget& target) {
  ProblemResult result;
  const Shape& s = problem.shape;
  const DType dtype = problem.dtype;
  FuzzMemory& memory = *target.memory;
  const Device device = memory.device();
  const HostInputs inputs = make_inputs(s, dtype, problem.backward, problem.input_seed);

  // Dense (batch, seqlen, heads, head_dim) tensors, or varlen (1, total, heads, head_dim) ones
  // viewed without their leading 1 (packed()).
  const bool varlen = s.varlen();
  const int64_t q_batch = varlen ? 1 : s.batch, q_rows = varlen ? s.total_q() : s.seqlen_q;
  const int64_t k_rows = varlen ? s.total_k() : s.seqlen_k;
  const auto view_of = [&](const FuzzTensor& t) { return varlen ? packed(t.view(device)) : t.view(device); };
  FuzzTensor q(dtype, problem.inputs, {q_batch, q_rows, s.heads_q, s.head_dim});
  FuzzTensor k(dtype, problem.inputs, {q_batch, k_rows, s.heads_kv, s.head_dim});
  FuzzTensor v(dtype, problem.inputs, {q_batch, k_rows, s.heads_kv, s.head_dim});
  FuzzTensor out(dtype, problem.outputs, {q_batch, q_rows, s.heads_q, s.head_dim});
  FuzzTensor lse(DType::kFloat32, TensorLayout{}, {q_batch, s.heads_q, q_rows});
  // cu_seqlens: int32 (batch + 1), stored as a (1, 1, batch + 1) tensor.
  FuzzTensor cu_q(DType::kInt32, TensorLayout{}, {1, 1, s.batch + 1});
  FuzzTensor cu_k(DType::kInt32, TensorLayout{}, {1, 1, s.batch + 1});
  if (varlen) {
    cu_q.set_values(cu_seqlens(s.lengths_q));
    cu_k.set_values(cu_seqlens(s.lengths_k));
    for (FuzzTensor* t : {&cu_q, &cu_k}) {
      if (call_failed(t->to_device(memory), "copy to the device", &result)) return result;
    }
  }
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
  fwd.q = view_of(q);
  fwd.k = view_of(k);
  fwd.v = view_of(v);
  fwd.out = view_of(out);
  fwd.lse = view_of(lse);
  if (varlen) {
    fwd.cu_seqlens_q = packed(packed(cu_q.view(device)));
    fwd.cu_seqlens_k = packed(packed(cu_k.view(device)));
    fwd.max_seqlen_q = s.seqlen_q;
    fwd.max_seqlen_k = s.seqlen_k;
  }
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

  const ReferenceProblem p = reference_problem(s, inputs, *fwd.softmax_scale);
  ForwardExpected expected;
  if (call_failed(expect_forward(s, p, dtype, inputs, target.threads, &expected), "reference", &result)) {
    return result;
  }
  judge("out", dtype, 2.0, out.values(), expected.base_out, expected.ref_out, &result);
  judge("lse", DType::kFloat32, 2.0, lse.values(), expected.base_lse, expected.ref_lse, &result);
  if (!out.outside_view_untouched()) fail(&result, "out: written outside its view");
  if (!problem.backward || result.verdict == Verdict::kFailed) return result;

  FuzzTensor dout(dtype, problem.inputs, {q_batch, q_rows, s.heads_q, s.head_dim});
  FuzzTensor dq(dtype, problem.outputs, {q_batch, q_rows, s.heads_q, s.head_dim});
  FuzzTensor dk(dtype, problem.outputs, {q_batch, k_rows, s.heads_kv, s.head_dim});
  FuzzTensor dv(dtype, problem.outputs, {q_batch, k_rows, s.heads_kv, s.head_dim});
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
  bwd.dout = view_of(dout);
  bwd.dq = view_of(dq);
  bwd.dk = view_of(dk);
  bwd.dv = view_of(dv);
  bwd.cu_seqlens_q = fwd.cu_seqlens_q;
  bwd.cu_seqlens_k = fwd.cu_seqlens_k;
  bwd.max_seqlen_q = fwd.max_seqlen_q;
  bwd.max_seqlen_k = fwd.max_seqlen_k;
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

  // FlashAttention's row sums D = rowsum(dO * O) come from the O the backward was given: the rule
  // allows dq and dk what that adds (accuracy.h), which matters where rows see one to a few keys.
  BackwardExpected grads;
  if (call_failed(expect_backward(s, p, dtype, inputs, out.values(), target.threads, &grads), "reference", &result)) {
    return result;
  }
  judge("dq", dtype, 3.0, dq.values(), grads.base_dq, grads.ref_dq, &result, grads.row_sums.dq);
  judge("dk", dtype, 3.0, dk.values(), grads.base_dk, grads.ref_dk, &result, grads.row_sums.dk);
  judge("dv", dtype, 3.0, dv.values(), grads.base_dv, grads.ref_dv, &result);
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
