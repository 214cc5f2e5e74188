#include "common/attention_tensors.h"

#include <random>
#include <sstream>
#include <stdexcept>

namespace flashcore::testing {
namespace {

// Odd, so padded rows are also misaligned relative to the unpadded ones.
constexpr std::int64_t kOddPad = 3;
// Keeps every row 16-byte aligned for fp16/bf16 (the GPU kernels' cp.async loads need it).
constexpr std::int64_t kAlignedPad = 8;

// q, k, v (or dq, dk, dv) as slices of one packed (batch, seqlen, 3, heads, head_dim) buffer.
void make_packed(const AttentionShape& s, DType dtype, HostTensor* q, HostTensor* k, HostTensor* v) {
  const HostTensor packed(dtype, {s.batch, s.seqlen_q, 3 * s.heads_q * s.head_dim});
  const std::int64_t row = s.heads_q * s.head_dim;
  const std::vector<std::int64_t> shape = {s.batch, s.seqlen_q, s.heads_q, s.head_dim};
  const std::vector<std::int64_t> strides = {s.seqlen_q * 3 * row, 3 * row, s.head_dim, 1};
  *q = HostTensor::slice(packed, 0, shape, strides);
  *k = HostTensor::slice(packed, row, shape, strides);
  *v = HostTensor::slice(packed, 2 * row, shape, strides);
}

}  // namespace

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::kContiguous:
      return "contiguous";
    case Layout::kPadded:
      return "padded";
    case Layout::kPaddedAligned:
      return "padded_aligned";
    case Layout::kPackedQkv:
      return "packed_qkv";
  }
  return "unknown";
}

std::string shape_name(const AttentionShape& s) {
  std::ostringstream out;
  out << "b" << s.batch << "_sq" << s.seqlen_q << "_sk" << s.seqlen_k << "_hq" << s.heads_q << "_hkv" << s.heads_kv
      << "_d" << s.head_dim << (s.causal ? "_causal" : "");
  return out.str();
}

AttentionTensors::AttentionTensors(const AttentionShape& s, DType type, Layout lay, std::uint64_t seed)
    : shape(s), dtype(type), layout(lay) {
  const std::int64_t pad = layout == Layout::kContiguous ? 0 : layout == Layout::kPadded ? kOddPad : kAlignedPad;
  const std::vector<std::int64_t> q_shape = {s.batch, s.seqlen_q, s.heads_q, s.head_dim};
  const std::vector<std::int64_t> k_shape = {s.batch, s.seqlen_k, s.heads_kv, s.head_dim};
  if (layout == Layout::kPackedQkv) {
    if (s.seqlen_q != s.seqlen_k || s.heads_q != s.heads_kv) {
      throw std::invalid_argument("packed qkv needs seqlen_q == seqlen_k and heads_q == heads_kv");
    }
    make_packed(s, dtype, &q, &k, &v);
    make_packed(s, dtype, &dq, &dk, &dv);
    outputs_own_storage = false;
  } else {
    q = HostTensor(dtype, q_shape, pad);
    k = HostTensor(dtype, k_shape, pad);
    v = HostTensor(dtype, k_shape, pad);
    dq = HostTensor(dtype, q_shape, pad);
    dk = HostTensor(dtype, k_shape, pad);
    dv = HostTensor(dtype, k_shape, pad);
  }
  out = HostTensor(dtype, q_shape, pad);
  dout = HostTensor(dtype, q_shape, pad);
  lse = HostTensor(DType::kFloat32, {s.batch, s.heads_q, s.seqlen_q}, pad);

  std::mt19937_64 rng(seed);
  for (HostTensor* t : {&q, &k, &v, &dout}) t->fill_normal(rng);
  poison_forward_outputs();
  poison_backward_outputs();
}

std::vector<float> random_alibi_slopes(std::int64_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 0.3f);
  std::vector<float> slopes(static_cast<size_t>(count));
  for (float& slope : slopes) slope = uniform(rng);
  return slopes;
}

std::string options_name(const ScoreOptions& o) {
  std::ostringstream out;
  if (o.window_left >= 0 || o.window_right >= 0) out << "_window" << o.window_left << "_" << o.window_right;
  if (o.softcap > 0.0f) out << "_softcap" << o.softcap;
  if (o.dropout_p > 0.0f) out << "_dropout" << static_cast<int>(o.dropout_p * 100.0f + 0.5f);
  if (!o.alibi_slopes.empty()) out << (o.alibi_per_batch ? "_alibi_per_batch" : "_alibi");
  return out.str();
}

TensorView AttentionTensors::alibi_view() const {
  if (options.alibi_slopes.empty()) return TensorView{};
  void* data = const_cast<float*>(options.alibi_slopes.data());
  return options.alibi_per_batch ? make_view(data, DType::kFloat32, Device::kCPU, {shape.batch, shape.heads_q})
                                 : make_view(data, DType::kFloat32, Device::kCPU, {shape.heads_q});
}

ForwardParams AttentionTensors::forward_params(Backend backend) const {
  ForwardParams p;
  p.q = q.view();
  p.k = k.view();
  p.v = v.view();
  p.out = out.view();
  p.lse = lse.view();
  p.softmax_scale = softmax_scale;
  p.causal = shape.causal;
  p.backend = backend;
  p.window_left = options.window_left;
  p.window_right = options.window_right;
  p.softcap = options.softcap;
  p.alibi_slopes = alibi_view();
  p.dropout_p = options.dropout_p;
  p.dropout_seed = options.dropout_seed;
  p.dropout_offset = options.dropout_offset;
  return p;
}

BackwardParams AttentionTensors::backward_params(Backend backend) const {
  BackwardParams p;
  p.q = q.view();
  p.k = k.view();
  p.v = v.view();
  p.out = out.view();
  p.dout = dout.view();
  p.lse = lse.view();
  p.dq = dq.view();
  p.dk = dk.view();
  p.dv = dv.view();
  p.softmax_scale = softmax_scale;
  p.causal = shape.causal;
  p.backend = backend;
  p.window_left = options.window_left;
  p.window_right = options.window_right;
  p.softcap = options.softcap;
  p.alibi_slopes = alibi_view();
  p.dropout_p = options.dropout_p;
  p.dropout_seed = options.dropout_seed;
  p.dropout_offset = options.dropout_offset;
  return p;
}

void AttentionTensors::poison_forward_outputs() {
  out.poison();
  lse.poison();
}

void AttentionTensors::poison_backward_outputs() {
  dq.poison();
  dk.poison();
  dv.poison();
}

}  // namespace flashcore::testing
