// Tile sizes and tile loads shared by the CPU flash forward and backward. Tiles are contiguous
// row-major float32 buffers, converted from the strided fp16/bf16/fp32 views once per tile, so the
// arithmetic in tile_gemm.h runs over unit-stride float arrays.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/log2e.h"
#include "cpu/element.h"

namespace flashcore::cpu {

// 256-row query blocks against 128-key blocks: a score tile is 128 KiB and a (256, head_dim <= 256)
// operand tile at most 256 KiB; at head_dim 128 one worker's tiles (~1 MiB in the backward) stay
// about in a Zen 4 core's 1 MiB L2. Each converted (and, for K, transposed) key tile then serves
// 256 query rows: the forward was ~15% conversions at 64 x 64 tiles, and 256 rows gave another
// 5-10% over 128 in fp32 (docs/tuning/cpu.md). Fewer, longer tasks balance worse at short seqlens,
// which the 2-core target does not feel.
inline constexpr std::int64_t kBlockM = 256;  // query rows per tile
inline constexpr std::int64_t kBlockN = 128; // key rows per tile

inline constexpr float kLn2 = 0.6931471805599453f;

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Rows [row0, row0 + rows) of head `head` of batch `b`, as a (rows, head_dim) tile.
template <typename Element>
void load_tile(const TensorView& t, std::int64_t b, std::int64_t head, std::int64_t row0, std::int64_t rows,
               float* tile) {
  const std::int64_t head_dim = t.shape[3];
  for (std::int64_t r = 0; r < rows; ++r)
    load_row(row_ptr<const Element>(t, b, row0 + r, head), head_dim, tile + r * head_dim);
}

// The same rows transposed, as a (head_dim, kBlockN) tile whose columns past `rows` are unused:
// the score kernels then read one key's values along a contiguous row.
template <typename Element>
void load_tile_transposed(const TensorView& t, std::int64_t b, std::int64_t head, std::int64_t row0, std::int64_t rows,
                          float* tile) {
  cpu_kernels().to_float_transposed(dtype_of<Element>(), row_ptr<const Element>(t, b, row0, head), t.stride[1], rows,
                                    t.shape[3], tile, kBlockN);
}

// Whether every one of the n floats is finite, from their exponent bits: an integer reduction the
// compiler vectorises (a float one it may not reorder). Run once per loaded tile, it costs a small
// fraction of the tile's products, and lets the products take the fast path whenever no NaN or
// infinity is about (masked_products.h says why they care).
inline bool all_finite(const float* values, std::int64_t n) {
  constexpr std::uint32_t kExponent = 0x7f800000u;
  std::uint32_t non_finite = 0;
  for (std::int64_t e = 0; e < n; ++e) {
    std::uint32_t bits;
    std::memcpy(&bits, values + e, sizeof(bits));
    non_finite |= static_cast<std::uint32_t>((bits & kExponent) == kExponent);
  }
  return non_finite == 0;
}

}  // namespace flashcore::cpu
