// Tile loads for ragged edges (rows past the sequence end, columns past head_dim) with sm80's
// cp.async. Loads (global -> shared) zero-fill what lies outside, so it adds nothing to a dot
// product and never feeds NaN/Inf garbage into 0 * x; the zeros come from the cp.async itself
// (a source size of 0 bytes reads nothing and writes 16 zero bytes), not from a separate
// shared-memory store: a predicated store beside every cp.async cost ~5 extra issued
// instructions per 16-byte vector (docs/tuning/forward.md v7, backward.md v5).
// Stores skip what lies outside (common/epilogue.h).
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

namespace flashcore::cuda::sm80 {

// src/dst: (CPY, CPY_ROWS, CPY_COLS) partitions of one tile, CPY being one 16-byte vector;
// coords: the tile's identity tensor partitioned the same way; rows_left / cols_left: how many
// rows / columns of the tile exist.
template <class Src, class Dst, class Coord>
__forceinline__ __device__ void cp_async_tile_zero_fill(Src const& src, Dst&& dst, Coord const& coords, int rows_left,
                                                        int cols_left) {
  using namespace cute;
  static_assert(decltype(size<0>(dst))::value * sizeof(typename std::remove_reference_t<Dst>::value_type) == 16,
                "one 16-byte vector per copy");
  CUTE_UNROLL
  for (int m = 0; m < size<1>(dst); ++m) {
    const bool row_inside = get<0>(coords(0, m, 0)) < rows_left;
    CUTE_UNROLL
    for (int k = 0; k < size<2>(dst); ++k) {
      const bool inside = row_inside && get<1>(coords(0, m, k)) < cols_left;
      SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<uint128_t>::copy(*reinterpret_cast<const uint128_t*>(&src(0, m, k)),
                                                       *reinterpret_cast<uint128_t*>(&dst(0, m, k)), inside);
    }
  }
}

}  // namespace flashcore::cuda::sm80
