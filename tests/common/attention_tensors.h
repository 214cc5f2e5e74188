// Host tensors for one attention problem, in one of the memory layouts the tests sweep, filled
// with seeded random values (never zeros) and with every output NaN-poisoned.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/host_tensor.h"
#include "flashcore/attention.h"

namespace flashcore::testing {

struct AttentionShape {
  std::int64_t batch = 1;
  std::int64_t seqlen_q = 1;
  std::int64_t seqlen_k = 1;
  std::int64_t heads_q = 1;
  std::int64_t heads_kv = 1;
  std::int64_t head_dim = 64;
  bool causal = false;
};

enum class Layout {
  kContiguous,  // every tensor row-major
  kPadded,      // every tensor with strides padded by an odd 3 elements (only head_dim contiguous):
                // rows lose 16-byte alignment, which the CPU backends take and the GPU kernels refuse
  kPaddedAligned,  // padded by 8 elements: non-contiguous, rows still 16-byte aligned (GPU tests)
  kPackedQkv,   // q, k, v (and dq, dk, dv) slices of one (batch, seqlen, 3, heads, head_dim) buffer;
                // needs seqlen_q == seqlen_k and heads_q == heads_kv. The others are padded
                // by 8 (aligned).
};

const char* layout_name(Layout layout);
std::string shape_name(const AttentionShape& shape);

struct AttentionTensors {
  AttentionTensors(const AttentionShape& shape, DType dtype, Layout layout, std::uint64_t seed);

  // Params over these tensors, with `softmax_scale` (unset: the API's default).
  ForwardParams forward_params(Backend backend) const;
  BackwardParams backward_params(Backend backend) const;

  void poison_forward_outputs();   // out, lse
  void poison_backward_outputs();  // dq, dk, dv

  AttentionShape shape;
  DType dtype;
  Layout layout;
  HostTensor q, k, v, dout;         // inputs, random
  HostTensor out, lse;              // forward outputs (and backward inputs)
  HostTensor dq, dk, dv;            // backward outputs
  bool outputs_own_storage = true;  // false when dq, dk, dv share one packed buffer
  std::optional<float> softmax_scale;
};

}  // namespace flashcore::testing
