// Dropout in the CPU flash paths (attention.h, "dropout"): the factors Z_ij (1 / (1 - p) where the
// random stream keeps entry (i, j), else 0) of one row of a tile, drawn from common/dropout.h's
// stream: one Philox draw serves 2 columns of 4 8-column groups, so a 64-column group of a row
// costs 8 draws (the other row each draw covers is drawn again for that row).
#pragma once

#include <algorithm>
#include <cstdint>

#include "api/problem.h"
#include "common/dropout.h"

namespace flashcore::cpu {

class DropoutRows {
 public:
  DropoutRows(const detail::AttentionProblem& p, std::int64_t b, std::int64_t h)
      : keep_max_(dropout_keep_max(p.dropout_p)), factor_(1.0f / (1.0f - p.dropout_p)) {
    stream_.key0 = static_cast<std::uint32_t>(p.dropout_seed);
    stream_.key1 = static_cast<std::uint32_t>(p.dropout_seed >> 32);
    stream_.head = static_cast<std::uint32_t>((b + p.dropout_batch0) * p.heads_q + h);
    stream_.offset = p.dropout_offset;
  }

  // z[0, cols) = the factors of row `row`, columns [col0, col0 + cols).
  void factors(std::int64_t row, std::int64_t col0, std::int64_t cols, float* z) const {
    const auto i = static_cast<std::uint32_t>(row);
    const int byte_row = DropoutStream::byte_of(i, 0);  // 0 or 2: which half of each word is this row's
    for (std::int64_t group = col0 / 64 * 64; group < col0 + cols; group += 64) {
      Philox4x32 draws[8];  // [column pair q * 2 + parity of the 8-column group]
      for (std::uint32_t d = 0; d < 8; ++d) {
        draws[d] = stream_.draw(DropoutStream::row_pair(i),
                                DropoutStream::column_group(static_cast<std::uint32_t>(group) + (d / 2) * 2 + (d % 2) * 8));
      }
      const std::int64_t begin = std::max(group, col0);
      const std::int64_t end = std::min(group + 64, col0 + cols);
      for (std::int64_t j = begin; j < end; ++j) {
        const auto jj = static_cast<std::uint32_t>(j);
        const Philox4x32& r = draws[((jj % 8) / 2) * 2 + (jj / 8) % 2];
        const std::uint32_t byte = (philox_word(r, DropoutStream::word_of(jj)) >> (8 * (byte_row + jj % 2))) & 0xffu;
        z[j - col0] = byte <= keep_max_ ? factor_ : 0.0f;
      }
    }
  }

 private:
  DropoutStream stream_;
  std::uint32_t keep_max_;
  float factor_;
};

}  // namespace flashcore::cpu
