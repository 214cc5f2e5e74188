// Host tensors for one attention problem, in one of the memory layouts the tests sweep, filled
// with seeded random values (never zeros) and with every output NaN-poisoned.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

// The score options of a problem (attention.h): window, softcap, ALiBi slopes.
struct ScoreOptions {
  std::int64_t window_left = -1;
  std::int64_t window_right = -1;
  float softcap = 0.0f;
  std::vector<float> alibi_slopes;  // empty: none; (heads_q) values, or (batch, heads_q) when per_batch
  bool alibi_per_batch = false;
  // Dropout (attention.h): 0 = off.
  float dropout_p = 0.0f;
  std::uint64_t dropout_seed = 0;
  std::uint32_t dropout_offset = 0;
};

// Random ALiBi slopes as flash_attn's tests draw them: uniform in [0, 0.3).
std::vector<float> random_alibi_slopes(std::int64_t count, std::uint64_t seed);
std::string options_name(const ScoreOptions& options);

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
  ScoreOptions options;  // applied by forward_params / backward_params (alibi: a host view)

  // The host view of options.alibi_slopes (absent when there are none).
  TensorView alibi_view() const;
};

}  // namespace flashcore::testing
