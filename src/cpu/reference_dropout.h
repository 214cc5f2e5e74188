// attention.h's dropout rule written out from the header, one Philox draw per entry (slow and
// plain): the float64 reference's (reference.cpp) and the accuracy baseline's (accuracy/baseline.cpp)
// view of which probabilities are kept. The fast paths use common/dropout.h's batched draws
// instead; tests/cpu/dropout_test.cpp checks the two agree entry by entry.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/philox.h"

namespace flashcore::cpu {

struct ReferenceDropout {
  double p = 0.0;  // dropout_p; 0: off
  std::uint64_t seed = 0;
  std::uint32_t offset = 0;
  std::int64_t heads_q = 1;
  std::int64_t batch0 = 0;  // added to b (a varlen sequence run as a dense call)

  bool on() const { return p > 0.0; }

  // Whether probability (b, h, i, j) is kept.
  bool keeps(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    const Philox4x32 counter{static_cast<std::uint32_t>((i / 16) * 8 + i % 8),
                             static_cast<std::uint32_t>(((j / 64) * 4 + (j % 8) / 2) * 2 + (j / 8) % 2),
                             static_cast<std::uint32_t>((b + batch0) * heads_q + h), offset};
    const Philox4x32 r =
        philox4x32_10(counter, static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
    const std::uint32_t words[4] = {r.x, r.y, r.z, r.w};
    const std::uint32_t byte = (words[(j % 64) / 16] >> (8 * (((i % 16) / 8) * 2 + j % 2))) & 0xffu;
    return static_cast<double>(byte) <= std::floor((1.0 - p) * 255.0);
  }

  // Z_ij: 1 / (1 - p) when kept, else 0; 1 when off.
  double factor(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    if (!on()) return 1.0;
    return keeps(b, h, i, j) ? 1.0 / (1.0 - p) : 0.0;
  }
};

}  // namespace flashcore::cpu
