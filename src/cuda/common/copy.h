// Predicated tile copies for ragged edges: rows past the sequence end and columns past head_dim
// are skipped (and, for shared-memory destinations, zero-filled so they add nothing to a dot
// product and never feed NaN/Inf garbage into 0 * x).
#pragma once

#include <cute/tensor.hpp>

namespace flashcore::cuda {

// src/dst: (CPY, CPY_ROWS, CPY_COLS) partitions of one tile; coords: the tile's identity tensor
// partitioned the same way; rows_left / cols_left: how many rows / columns of the tile exist.
template <bool kZeroFillOutside, class TiledCopy, class Src, class Dst, class Coord>
__forceinline__ __device__ void copy_tile_predicated(TiledCopy const& tiled_copy, Src const& src, Dst&& dst,
                                                     Coord const& coords, int rows_left, int cols_left) {
  using namespace cute;
  CUTE_UNROLL
  for (int m = 0; m < size<1>(dst); ++m) {
    const bool row_inside = get<0>(coords(0, m, 0)) < rows_left;
    CUTE_UNROLL
    for (int k = 0; k < size<2>(dst); ++k) {
      if (row_inside && get<1>(coords(0, m, k)) < cols_left) {
        copy(tiled_copy, src(_, m, k), dst(_, m, k));
      } else if constexpr (kZeroFillOutside) {
        clear(dst(_, m, k));
      }
    }
  }
}

}  // namespace flashcore::cuda
