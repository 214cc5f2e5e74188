// Which keys a query row may see in the CPU flash paths, and the block bounds that follow from it.
// attention.h's rule, bottom-right aligned: query i sees key j iff
//   j <= i + seqlen_k - seqlen_q + right   (right = 0 when causal; no bound when -1)
//   j >= i + seqlen_k - seqlen_q - left    (no bound when left is -1)
// so every row sees one contiguous run of keys [key_begin, key_end), and every key one contiguous
// run of rows [first_row, row_end). The float64 reference has its own copy of this rule on purpose
// (reference.cpp).
#pragma once

#include <algorithm>
#include <cstdint>

#include "api/problem.h"

namespace flashcore::cpu {

struct KeyRange {
  std::int64_t seqlen_q;
  std::int64_t seqlen_k;
  std::int64_t left;   // -1: unbounded
  std::int64_t right;  // -1: unbounded; 0 when causal

  explicit KeyRange(const detail::AttentionProblem& p)
      : seqlen_q(p.seqlen_q), seqlen_k(p.seqlen_k), left(p.window_left), right(p.causal ? 0 : p.window_right) {}

  std::int64_t diagonal(std::int64_t row) const { return row + seqlen_k - seqlen_q; }

  // The first key query `row` sees, in [0, seqlen_k].
  std::int64_t key_begin(std::int64_t row) const {
    if (left < 0) return 0;
    return std::clamp<std::int64_t>(diagonal(row) - left, 0, seqlen_k);
  }

  // One past the last key query `row` sees, in [0, seqlen_k].
  std::int64_t key_end(std::int64_t row) const {
    if (right < 0) return seqlen_k;
    return std::clamp<std::int64_t>(diagonal(row) + right + 1, 0, seqlen_k);
  }

  bool sees_none(std::int64_t row) const { return key_begin(row) >= key_end(row); }

  // The first query row that sees `key` (a row past it may still not see it when left bounds it).
  std::int64_t first_row(std::int64_t key) const {
    if (right < 0) return 0;
    return std::clamp<std::int64_t>(key - (seqlen_k - seqlen_q) - right, 0, seqlen_q);
  }

  // One past the last query row that sees `key`.
  std::int64_t row_end(std::int64_t key) const {
    if (left < 0) return seqlen_q;
    return std::clamp<std::int64_t>(key - (seqlen_k - seqlen_q) + left + 1, 0, seqlen_q);
  }
};

}  // namespace flashcore::cpu
