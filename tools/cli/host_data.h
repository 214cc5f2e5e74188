// The problem one `flashcore run` solves: its shape and seeded random inputs on the host.
//
// Inputs are drawn from a normal distribution, rounded once to the run's dtype, and kept as
// doubles: every implementation and the float64 reference then see exactly the same numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "flashcore/tensor.h"

namespace flashcore::cli {

struct Shape {
  std::int64_t batch = 0;
  std::int64_t seqlen_q = 0;
  std::int64_t seqlen_k = 0;
  std::int64_t heads_q = 0;
  std::int64_t heads_kv = 0;
  std::int64_t head_dim = 0;
  bool causal = false;
  // Score options (flashcore/attention.h): --window, --softcap, --alibi.
  std::int64_t window_left = -1;
  std::int64_t window_right = -1;
  double softcap = 0.0;
  bool alibi = false;  // random (batch, heads_q) slopes in HostInputs::alibi_slopes
  double dropout_p = 0.0;          // --dropout (0: off)
  std::uint64_t dropout_seed = 0;  // the Philox key: --seed (offset 0)
  // --varlen: each sequence's query and key count (`batch` entries each; empty: the dense layout).
  // The tensors are then packed as attention.h's varlen layout, (total, heads, head_dim) and the LSE
  // (heads_q, total_q), and seqlen_q / seqlen_k are max_seqlen_q / max_seqlen_k: bounds that every
  // length stays within, not necessarily reached.
  std::vector<std::int64_t> lengths_q;
  std::vector<std::int64_t> lengths_k;

  bool has_window() const { return window_left >= 0 || window_right >= 0; }
  bool has_score_options() const { return has_window() || softcap > 0.0 || alibi || dropout_p > 0.0; }

  bool varlen() const { return !lengths_q.empty(); }
  // Rows of the packed q and k (varlen), or batch * seqlen.
  std::int64_t total_q() const { return varlen() ? sum(lengths_q) : batch * seqlen_q; }
  std::int64_t total_k() const { return varlen() ? sum(lengths_k) : batch * seqlen_k; }
  // Sequence b's query and key counts, either layout.
  std::int64_t length_q(std::int64_t b) const { return varlen() ? lengths_q[static_cast<std::size_t>(b)] : seqlen_q; }
  std::int64_t length_k(std::int64_t b) const { return varlen() ? lengths_k[static_cast<std::size_t>(b)] : seqlen_k; }

  std::int64_t q_elements() const { return total_q() * heads_q * head_dim; }   // q, out, dout, dq
  std::int64_t kv_elements() const { return total_k() * heads_kv * head_dim; }  // k, v, dk, dv
  std::int64_t lse_elements() const { return heads_q * total_q(); }

 private:
  static std::int64_t sum(const std::vector<std::int64_t>& values) {
    std::int64_t total = 0;
    for (std::int64_t v : values) total += v;
    return total;
  }
};

// Dense tensors as commented; with --varlen the first two dimensions are the packed rows instead:
// (total_q, heads_q, head_dim) and (total_k, heads_kv, head_dim), the LSE (heads_q, total_q).
struct HostInputs {
  std::vector<double> q;     // (batch, seqlen_q, heads_q, head_dim)
  std::vector<double> k;     // (batch, seqlen_k, heads_kv, head_dim)
  std::vector<double> v;     // (batch, seqlen_k, heads_kv, head_dim)
  std::vector<double> dout;  // (batch, seqlen_q, heads_q, head_dim); empty unless backward
  // (batch, heads_q) float32 values as flash_attn's tests draw them (uniform in [0, 0.3)); empty
  // unless shape.alibi.
  std::vector<double> alibi_slopes;
};

// The outputs of one run, widened to double for the check.
struct HostOutputs {
  std::vector<double> out;
  std::vector<double> lse;  // (batch, heads_q, seqlen_q); -inf where a row sees no key
  std::vector<double> dq;   // gradients: empty unless backward
  std::vector<double> dk;
  std::vector<double> dv;
};

// The softmax scale every implementation and the reference are given: flashcore's default,
// 1/sqrt(head_dim) in float, passed explicitly so no implementation rounds its own.
float softmax_scale(const Shape& shape);

// Standard-normal inputs rounded to `dtype`, reproducible from `seed`.
HostInputs make_inputs(const Shape& shape, DType dtype, bool backward, std::uint64_t seed);

// Element conversions between the host's doubles and a buffer of `dtype` (fp16, bf16 or fp32),
// rounding to nearest even as the GPU does.
std::vector<std::byte> encode(const std::vector<double>& values, DType dtype);
std::vector<double> decode(const void* data, DType dtype, std::int64_t count);

}  // namespace flashcore::cli
