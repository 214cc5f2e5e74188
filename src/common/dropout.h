// Dropout's random stream (attention.h, "dropout"): which Philox4x32-10 draw and which byte of it
// decide whether probability (b, h, i, j) is kept. Host and device code, used by the CPU flash
// backend and the CUDA kernels; the float64 reference writes the same mapping out on its own
// (cpu/reference.cpp), so a slip here cannot pass its own check.
//
// One draw (128 bits) covers rows i and i + 8 of a 16-row group, and columns 2q, 2q + 1 of every
// other 8-column group of a 64-column group (y below): the entries one thread holds of an mma.sync
// or wgmma accumulator tile, so a kernel pays one Philox call per 16 probabilities.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/philox.h"

namespace flashcore {

// The largest byte that keeps a probability: flash_attn 2.x's floor(255 * (1 - p)).
inline std::uint32_t dropout_keep_max(float dropout_p) {
  return static_cast<std::uint32_t>(std::floor((1.0 - static_cast<double>(dropout_p)) * 255.0));
}

struct DropoutStream {
  std::uint32_t key0 = 0, key1 = 0;  // the seed's low and high words
  std::uint32_t head = 0;            // b * heads_q + h
  std::uint32_t offset = 0;

  // counter x: rows i and i + 8 of a 16-row group share it.
  FLASHCORE_HOST_DEVICE static std::uint32_t row_pair(std::uint32_t i) { return (i / 16) * 8 + i % 8; }
  // counter y: the 64-column group, the column pair within an 8-column group, the 8-column group's parity.
  FLASHCORE_HOST_DEVICE static std::uint32_t column_group(std::uint32_t j) {
    return ((j / 64) * 4 + (j % 8) / 2) * 2 + (j / 8) % 2;
  }
  // Of the draw's four words, the one holding column j; of its four bytes, the one of (i, j).
  FLASHCORE_HOST_DEVICE static int word_of(std::uint32_t j) { return static_cast<int>((j % 64) / 16); }
  FLASHCORE_HOST_DEVICE static int byte_of(std::uint32_t i, std::uint32_t j) {
    return static_cast<int>(((i % 16) / 8) * 2 + j % 2);
  }

  FLASHCORE_HOST_DEVICE Philox4x32 draw(std::uint32_t row_pair_index, std::uint32_t column_group_index) const {
    return philox4x32_10(Philox4x32{row_pair_index, column_group_index, head, offset}, key0, key1);
  }
};

FLASHCORE_HOST_DEVICE std::uint32_t philox_word(const Philox4x32& r, int word) {
  return word == 0 ? r.x : word == 1 ? r.y : word == 2 ? r.z : r.w;
}

}  // namespace flashcore
