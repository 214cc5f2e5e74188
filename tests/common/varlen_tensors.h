// A variable-length test problem (attention.h, "varlen"): packed host tensors for a list of
// sequence lengths and options, the params of a forward and backward over them, and the check of
// the outputs against the float64 reference run sequence by sequence under FlashAttention's rule
// (the same-precision baseline per sequence too). The CPU and GPU tests share it: the GPU test
// mirrors the views to the device, runs, and downloads into these host tensors before checking.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "common/host_tensor.h"
#include "flashcore/accuracy.h"
#include "flashcore/attention.h"

namespace flashcore::testing {

struct VarlenCase {
  const char* name;
  std::vector<std::int32_t> lens_q, lens_k;
  std::int64_t heads_q, heads_kv, head_dim;
  bool causal = false;
  std::int64_t window_left = -1, window_right = -1;
  float softcap = 0.0f;
  bool alibi = false;  // (batch, heads_q) slopes
  float dropout_p = 0.0f;  // with seed kDropoutSeed, offset kDropoutOffset
};
inline constexpr std::uint64_t kVarlenDropoutSeed = 0x5eed0f5eed1234ull;
inline constexpr std::uint32_t kVarlenDropoutOffset = 12;

inline void PrintTo(const VarlenCase& c, std::ostream* os) { *os << c.name; }

// Cases from plain to every option at once, with empty sequences and seqlen_q != seqlen_k.
const std::vector<VarlenCase>& varlen_cases();

struct VarlenTensors {
  VarlenTensors(const VarlenCase& c, DType dtype);

  VarlenCase c;
  DType dtype;
  std::int64_t batch, total_q, total_k, max_q, max_k;
  float scale;
  std::vector<std::int32_t> cu_q, cu_k;
  std::vector<float> slopes;  // (batch, heads_q)
  HostTensor q, k, v, dout, out, lse, dq, dk, dv;

  // Params over the host views (CPU backends); a GPU test swaps in device views.
  ForwardParams forward_params(Backend backend) const;
  BackwardParams backward_params(Backend backend) const;

  // out, lse, dq, dk, dv against the per-sequence reference; LSE -inf exactly where no key is seen.
  // gradients false: out and lse only (a forward run alone).
  std::vector<accuracy::Comparison> check(bool gradients = true) const;
};

}  // namespace flashcore::testing
