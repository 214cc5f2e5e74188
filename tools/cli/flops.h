// The one FLOP count behind every TFLOP/s the CLI prints (the project's convention, which is
// FlashAttention's benchmark's): forward 4 * B * Hq * Sq * Sk * D (two matmuls of 2 FLOPs per
// multiply-add), halved when causal; backward 2.5x the forward (five matmuls to the forward's
// two); a forward + backward pass the sum. With causal and seqlen_q != seqlen_k the halving is
// kept rather than counting the exact visible pairs, so numbers compare with FlashAttention's.
// With a sliding window (--window) only the visible (query, key) pairs are counted, exactly: a
// window's TFLOP/s then say how well the kernels skip what the window hides. With --varlen each
// sequence counts its own pairs (real tokens only, no padding to max_seqlen).
#pragma once

#include <algorithm>
#include <cstdint>

#include "host_data.h"

namespace flashcore::cli {

enum class Pass { kForward, kBackward, kForwardBackward };

// The (query, key) pairs a window leaves visible in one head of a seqlen_q x seqlen_k problem:
// attention.h's rule.
inline double visible_pairs(const Shape& s, std::int64_t seqlen_q, std::int64_t seqlen_k) {
  const std::int64_t right = s.causal ? 0 : s.window_right;
  double pairs = 0.0;
  for (std::int64_t i = 0; i < seqlen_q; ++i) {
    const std::int64_t diagonal = i + seqlen_k - seqlen_q;
    const std::int64_t begin = s.window_left >= 0 ? std::max<std::int64_t>(0, diagonal - s.window_left) : 0;
    const std::int64_t end = right >= 0 ? std::min<std::int64_t>(seqlen_k, diagonal + right + 1) : seqlen_k;
    pairs += static_cast<double>(std::max<std::int64_t>(0, end - begin));
  }
  return pairs;
}

// The pairs counted for one head of one sequence (see the top of this file).
inline double counted_pairs(const Shape& s, std::int64_t seqlen_q, std::int64_t seqlen_k) {
  return s.has_window() ? visible_pairs(s, seqlen_q, seqlen_k)
                        : static_cast<double>(seqlen_q) * static_cast<double>(seqlen_k) * (s.causal ? 0.5 : 1.0);
}

inline double flops(const Shape& s, Pass pass) {
  double pairs = 0.0;  // over the whole batch
  if (s.varlen()) {
    for (std::int64_t b = 0; b < s.batch; ++b) pairs += counted_pairs(s, s.length_q(b), s.length_k(b));
  } else {
    pairs = static_cast<double>(s.batch) * counted_pairs(s, s.seqlen_q, s.seqlen_k);
  }
  const double forward = 4.0 * static_cast<double>(s.heads_q) * pairs * static_cast<double>(s.head_dim);
  switch (pass) {
    case Pass::kForward: return forward;
    case Pass::kBackward: return 2.5 * forward;
    case Pass::kForwardBackward: return 3.5 * forward;
  }
  return forward;
}

}  // namespace flashcore::cli
