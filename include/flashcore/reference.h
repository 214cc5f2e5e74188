// The float64 reference: exact softmax attention and its gradients computed in double, one query
// row at a time over every key, sharing no masking or softmax code with the fast paths. It is the
// oracle the tests, the CLI's --check and the fuzzer compare against; ForwardParams with
// Backend::kCpuReference runs the same math rounded to the output dtype. NaN and infinities in the
// inputs go through the plain formula unguarded (attention.h, "Non-finite inputs").
//
// Arrays are contiguous float64 in the API's order (attention.h):
//   q, out, dq, dout: (batch, seqlen_q, heads_q, head_dim)
//   k, v, dk, dv:     (batch, seqlen_k, heads_kv, head_dim)
//   lse:              (batch, heads_q, seqlen_q), natural log, -inf for a row that sees no key
#pragma once

#include <cstdint>

#include "flashcore/tensor.h"

namespace flashcore {

struct ReferenceProblem {
  std::int64_t batch = 0;
  std::int64_t seqlen_q = 0;
  std::int64_t seqlen_k = 0;
  std::int64_t heads_q = 0;
  std::int64_t heads_kv = 0;
  std::int64_t head_dim = 0;
  double softmax_scale = 0.0;
  bool causal = false;  // bottom-right aligned, as attention.h states
  // Score options, as attention.h defines them.
  std::int64_t window_left = -1;   // -1: unbounded
  std::int64_t window_right = -1;  // -1: unbounded
  double softcap = 0.0;            // 0: off
  // ALiBi slopes, or null: (heads_q) values, or (batch, heads_q) when alibi_slopes_per_batch.
  const double* alibi_slopes = nullptr;
  bool alibi_slopes_per_batch = false;
  // Dropout, as attention.h defines it (its Philox stream): 0 = off.
  double dropout_p = 0.0;
  std::uint64_t dropout_seed = 0;
  std::uint32_t dropout_offset = 0;
  std::int64_t dropout_first_batch = 0;  // the stream's batch index of batch 0 (one varlen sequence alone)
};

// num_threads: 0 uses every hardware thread; the result does not depend on it.
Status reference_forward(const ReferenceProblem& problem, const double* q, const double* k, const double* v,
                         double* out, double* lse, int num_threads = 0);

// The exact gradient of sum(out * dout) with respect to q, k and v (the forward is recomputed).
Status reference_backward(const ReferenceProblem& problem, const double* q, const double* k, const double* v,
                          const double* dout, double* dq, double* dk, double* dv, int num_threads = 0);

}  // namespace flashcore
