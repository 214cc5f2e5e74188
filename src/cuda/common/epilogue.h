// The epilogue every family shares for a register tile (O in the forward; dK, dV, dQ in the
// backward): fragments -> shared memory (with the copy atom the family's MMA layout allows, e.g.
// stmatrix) -> 16-byte vectors -> global memory, rows and columns outside the problem skipped.
// Going through shared memory turns each thread's scattered fragment values into whole 16-byte
// row segments, so the global stores are full sectors.
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>

#include "cuda/common/fragment.h"

namespace flashcore::cuda {

// Registers -> global: copies the vectors inside the tile and skips the rest.
// src/dst: (CPY, CPY_ROWS, CPY_COLS) partitions of one tile, CPY being one 16-byte vector;
// coords: the tile's identity tensor partitioned the same way; rows_left / cols_left: how many
// rows / columns of the tile exist.
template <class TiledCopy, class Src, class Dst, class Coord>
__forceinline__ __device__ void copy_tile_predicated(TiledCopy const& tiled_copy, Src const& src, Dst&& dst,
                                                     Coord const& coords, int rows_left, int cols_left) {
  using namespace cute;
  CUTE_UNROLL
  for (int m = 0; m < size<1>(dst); ++m) {
    const bool row_inside = get<0>(coords(0, m, 0)) < rows_left;
    CUTE_UNROLL
    for (int k = 0; k < size<2>(dst); ++k) {
      if (row_inside && get<1>(coords(0, m, k)) < cols_left) copy(tiled_copy, src(_, m, k), dst(_, m, k));
    }
  }
}

// frag (already in the element type, partitioned like tiled_mma's C) -> the shared-memory tile
// sTile. The caller synchronises: before, so nobody still reads what sTile overwrites; after,
// before smem_to_gmem reads it.
template <class SmemCopyAtom, class TiledMma, class Frag, class SmemTile>
__forceinline__ __device__ void fragment_to_smem(SmemCopyAtom const& atom, TiledMma const& tiled_mma, Frag const& frag,
                                                 SmemTile&& sTile, int thread_idx) {
  using namespace cute;
  auto smem_copy = make_tiled_copy_C(atom, tiled_mma);
  auto thr_copy = smem_copy.get_thread_slice(thread_idx);
  copy(smem_copy, thr_copy.retile_S(frag), thr_copy.partition_D(sTile));
}

// The shared-memory tile sTile -> gTile (same static shape) in GmemTiledCopy's 16-byte vectors;
// rows >= rows_left and columns >= cols_left are not written.
template <class GmemTiledCopy, class SmemTile, class GmemTile>
__forceinline__ __device__ void smem_to_gmem(SmemTile const& sTile, GmemTile&& gTile, int rows_left, int cols_left,
                                             int thread_idx) {
  using namespace cute;
  using Element = typename std::decay_t<GmemTile>::value_type;
  GmemTiledCopy gmem_tiled_copy;
  auto thr_copy = gmem_tiled_copy.get_thread_slice(thread_idx);
  Tensor tTsT = thr_copy.partition_S(sTile);  // (CPY, CPY_ROWS, CPY_COLS)
  Tensor tTgT = thr_copy.partition_D(gTile);
  Tensor tTcT = thr_copy.partition_D(make_identity_tensor(shape(gTile)));
  Tensor tTrT = make_tensor<Element>(shape(tTgT));
  copy(gmem_tiled_copy, tTsT, tTrT);
  copy_tile_predicated(gmem_tiled_copy, tTrT, tTgT, tTcT, rows_left, cols_left);
}

// One value per row of a tile (the LSE), held in registers by the threads of tiled_mma's C
// partition of a tile of shape `tile` (each thread's rows as accumulator_as_rows_cols lists them):
// the lane holding column 0 of a row writes dst[row] for rows < rows_left, once per row.
template <int kRows, class TiledMma, class TileShape>
__forceinline__ __device__ void write_row_values(TiledMma const& tiled_mma, TileShape const& tile,
                                                 const float (&values)[kRows], float* dst, int rows_left,
                                                 int thread_idx) {
  using namespace cute;
  Tensor coords = tiled_mma.get_thread_slice(thread_idx).partition_C(make_identity_tensor(tile));
  Tensor rows_cols = make_tensor(coords.data(), accumulator_as_rows_cols(coords.layout()));
  if (get<1>(rows_cols(0, 0)) != 0) return;
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const int row = get<0>(rows_cols(r, 0));
    if (row < rows_left) dst[row] = values[r];
  }
}

}  // namespace flashcore::cuda
