// Which keys a query row may see in the CPU flash paths, and the block bounds that follow from it.
// Causal is aligned bottom-right (attention.h): query i sees key j iff j <= i + seqlen_k - seqlen_q.
// The float64 reference has its own copy of this rule on purpose (reference.cpp).
#pragma once

#include <algorithm>
#include <cstdint>

namespace flashcore::cpu {

struct KeyRange {
  std::int64_t seqlen_q;
  std::int64_t seqlen_k;
  bool causal;

  // One past the last key query `row` sees, in [0, seqlen_k]; 0 means the row sees no key.
  std::int64_t key_end(std::int64_t row) const {
    if (!causal) return seqlen_k;
    return std::clamp<std::int64_t>(row + seqlen_k - seqlen_q + 1, 0, seqlen_k);
  }

  // The first query row that sees `key`, in [0, seqlen_q]; every later row sees it too.
  std::int64_t first_row(std::int64_t key) const {
    if (!causal) return 0;
    return std::clamp<std::int64_t>(key - (seqlen_k - seqlen_q), 0, seqlen_q);
  }
};

}  // namespace flashcore::cpu
