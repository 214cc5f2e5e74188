// The forward epilogue: O (fp32 registers) -> 16-bit -> straight to global memory, each thread
// storing its column pairs (4 bytes) of its rows, with rows outside [0, seqlen_q) and columns past
// the real head_dim left unwritten. The LSE rows go out the same way from the column-0 threads.
//
// No shared memory and no barrier: each consumer warpgroup finishes its tile on its own, and
// Q's buffer can be refilled for the next tile as soon as the last QK^T has read it (the
// producer's Q load for tile i+1 overlaps the last P V and this epilogue of tile i). An O
// tile is written once per tile, so the narrower stores cost little against the K/V stream.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/sm90/fragment.h"
#include "cuda/sm90/fwd_sequence.h"
#include "cuda/sm90/tile_scheduler.h"

namespace flashcore::cuda::sm90 {

template <class Traits>
struct FwdEpilogue {
  using Element = typename Traits::Element;
  using Params = typename Traits::Params;
  static constexpr int kBlockM = Traits::kBlockM;

  struct alignas(2 * sizeof(Element)) ElementPair {
    Element x, y;
  };

  template <class FragO, int kRows>
  __forceinline__ __device__ static void store(Params const& params, FragO const& tOrO, float const (&lse)[kRows],
                                               FwdTile const& tile, int thread_idx) {
    using namespace cute;
    typename Traits::TiledMmaPV mma_pv;
    auto thr_pv = mma_pv.get_thread_slice(thread_idx);
    Tensor rO = make_tensor<Element>(tOrO.layout());
    convert_into(tOrO, rO);
    Tensor rO_rc = make_tensor(rO.data(), wgmma_acc_as_rows_cols(rO.layout()));  // (rows, d)
    Tensor tOcO = thr_pv.partition_C(make_identity_tensor(select<0, 1>(typename Traits::TileShapePV{})));
    Tensor tOcO_rc = make_tensor(tOcO.data(), wgmma_acc_as_rows_cols(tOcO.layout()));  // (rows, d) -> (row, col)
    static_assert(decltype(size<1, 0>(rO_rc))::value == 2, "columns come in (col, col + 1) pairs");

    // Varlen: the sequence's rows of the packed out and LSE (batch strides 0), bounded by its own
    // seqlen_q: the tile's rows past it belong to the next sequence.
    const FwdSequence<Traits> seq(params, tile.batch);
    Element* out = static_cast<Element*>(params.out) + tile.batch * params.o_batch_stride +
                   tile.head * params.o_head_stride + int64_t(seq.row_q) * params.o_row_stride;
    // Rows in the sequence's frame: the tile grid starts row_offset rows above it (causal).
    const int row0 = tile.m_block * kBlockM - seq.row_offset;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int row = row0 + get<0>(tOcO_rc(r, 0));
      if (row < 0 || row >= seq.seqlen_q) continue;
      Element* out_row = out + row * params.o_row_stride;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(rO_rc); c += 2) {
        const int col = get<1>(tOcO_rc(r, c));
        if (col + 1 < params.head_dim) {
          *reinterpret_cast<ElementPair*>(out_row + col) = ElementPair{rO_rc(r, c), rO_rc(r, c + 1)};
        } else if (col < params.head_dim) {
          out_row[col] = rO_rc(r, c);
        }
      }
    }

    if (params.lse != nullptr && get<1>(tOcO_rc(0, 0)) == 0) {
      float* lse_out =
          params.lse + tile.batch * params.lse_batch_stride + tile.head * params.lse_head_stride + seq.row_q;
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const int row = row0 + get<0>(tOcO_rc(r, 0));
        if (row >= 0 && row < seq.seqlen_q) lse_out[row] = lse[r];
      }
    }
  }
};

}  // namespace flashcore::cuda::sm90
