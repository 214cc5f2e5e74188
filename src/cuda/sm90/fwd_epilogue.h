// The forward epilogue: O (fp32 registers) -> 16-bit -> global memory straight from registers,
// and the LSE rows from the column-0 threads. 4, 8 or 16 bytes a thread-instruction
// (FwdTileSize::o_store_bytes; the wider ones shuffle within each quad first); rows outside
// [0, seqlen_q) of the tile's sequence (fwd_sequence.h: a varlen tile's rows past it belong to the
// next sequence) and columns past the real head_dim left unwritten. No shared memory and no
// barrier: Q's buffer was released right after the last QK^T (fwd_mainloop.h), so the next tile's
// Q load overlaps this epilogue. Why the wide stores: with 4-byte stores the epilogue takes 2.0 us
// (d128) / 6.5 us (d256) a tile at 2k keys with no wgmma issued meanwhile; 8/16 bytes cut it 4-5x.
// Direct stores rather than O through shared memory and a TMA store: the next tile's Q load would
// wait for the stores' smem reads (docs/tuning/forward_sm90.md, v10-v13).
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
  static constexpr int kHeadDim = Traits::kHeadDim;

  // Two adjacent 16-bit elements: one 4-byte store, or one 32-bit shuffle operand.
  struct alignas(2 * sizeof(Element)) ElementPair {
    Element x, y;
  };

  template <class FragO, int kRows>
  __forceinline__ __device__ static void store(Params const& params, FragO const& tOrO, float const (&lse)[kRows],
                                               FwdTile const& tile, int thread_idx) {
    const FwdSequence<Traits> seq(params, tile.batch);
    store_o(params, tOrO, tile, seq, thread_idx);
    store_lse(params, lse, tile, seq, thread_idx);
  }

 private:
  // What every O store needs: all of O in 16-bit first (the fp32 accumulator then dies; the
  // wider stores' shuffles hold packed pairs only), as (rows, d) with each element's (row, col),
  // the (batch, head) slice of O and the tile's first row; then the store loop of the tile's width.
  template <class FragO>
  __forceinline__ __device__ static void store_o(Params const& params, FragO const& tOrO, FwdTile const& tile,
                                                 FwdSequence<Traits> const& seq, int thread_idx) {
    using namespace cute;
    typename Traits::TiledMmaPV mma_pv;
    auto thr_pv = mma_pv.get_thread_slice(thread_idx);
    Tensor rO = make_tensor<Element>(tOrO.layout());
    convert_into(tOrO, rO);
    Tensor rO_rc = make_tensor(rO.data(), wgmma_acc_as_rows_cols(rO.layout()));  // (rows, d)
    Tensor tOcO = thr_pv.partition_C(make_identity_tensor(select<0, 1>(typename Traits::TileShapePV{})));
    Tensor tOcO_rc = make_tensor(tOcO.data(), wgmma_acc_as_rows_cols(tOcO.layout()));  // (rows, d) -> (row, col)
    Element* out = static_cast<Element*>(params.out) + tile.batch * params.o_batch_stride +
                   tile.head * params.o_head_stride + int64_t(seq.row_q) * params.o_row_stride;
    // Rows in the sequence's frame: the tile grid starts row_offset rows above it (causal).
    const int row0 = tile.m_block * kBlockM - seq.row_offset;
    if constexpr (Traits::kOStoreBytes == 16) {
      store_rows_16b(params, rO_rc, tOcO_rc, out, row0, seq.seqlen_q, thread_idx);
    } else if constexpr (Traits::kOStoreBytes == 8) {
      store_rows_8b(params, rO_rc, tOcO_rc, out, row0, seq.seqlen_q, thread_idx);
    } else {
      store_rows_4b(params, rO_rc, tOcO_rc, out, row0, seq.seqlen_q);
    }
  }

  // 4 bytes a thread-instruction: each thread stores its column pairs of its rows.
  template <class RowsCols, class Coords>
  __forceinline__ __device__ static void store_rows_4b(Params const& params, RowsCols const& rO_rc,
                                                       Coords const& tOcO_rc, Element* out, int row0,
                                                       int seqlen_q) {
    using namespace cute;
    static_assert(decltype(size<1, 0>(rO_rc))::value == 2, "columns come in (col, col + 1) pairs");
    CUTE_UNROLL
    for (int r = 0; r < size<0>(rO_rc); ++r) {
      const int row = row0 + get<0>(tOcO_rc(r, 0));
      if (row < 0 || row >= seqlen_q) continue;
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
  }

  // 8 bytes a thread-instruction (Traits::kOStoreBytes == 8): lanes q and q ^ 1 of a quad swap one
  // pair of every two 8-column groups (one __shfl_xor_sync per two pairs), after which the even
  // lane holds pairs (q, q + 1) of the first group and the odd lane pairs (q - 1, q) of the
  // second, and each stores them with one st.global.v2: a quad writes 32 contiguous bytes of its
  // row (a whole sector) per instruction instead of 16. Half the shuffles and live values of the
  // 16-byte stores; the d256 tile's choice (16 measured no better there, v13).
  template <class RowsCols, class Coords>
  __forceinline__ __device__ static void store_rows_8b(Params const& params, RowsCols const& rO_rc,
                                                       Coords const& tOcO_rc, Element* out, int row0, int seqlen_q,
                                                       int thread_idx) {
    using namespace cute;
    static_assert(sizeof(Element) == 2, "16-bit O");
    constexpr int kRows = decltype(size<0>(rO_rc))::value;
    constexpr int kGroups = decltype(size<1>(rO_rc))::value / 2;  // 8-column groups, one pair each
    static_assert(kGroups % 2 == 0, "groups exchanged two at a time");
    const int odd = thread_idx & 1;  // the lane's bit 0 within its quad
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      // Every lane shuffles, the row check comes after (__shfl_xor_sync needs all 32 lanes).
      const int row = row0 + get<0>(tOcO_rc(r, 0));
      const bool row_ok = row >= 0 && row < seqlen_q;
      Element* out_row = out + int64_t(row) * params.o_row_stride;
      CUTE_UNROLL
      for (int g = 0; g < kGroups / 2; ++g) {
        const ElementPair p0{rO_rc(r, 4 * g), rO_rc(r, 4 * g + 1)};      // this lane's pair of group 2g
        const ElementPair p1{rO_rc(r, 4 * g + 2), rO_rc(r, 4 * g + 3)};  // and of group 2g + 1
        const uint32_t a0 = reinterpret_cast<uint32_t const&>(p0);
        const uint32_t a1 = reinterpret_cast<uint32_t const&>(p1);
        const uint32_t got = __shfl_xor_sync(0xffffffffu, odd ? a0 : a1, 1);
        const int col = get<1>(tOcO_rc(r, 2 * (2 * g + odd))) - 2 * odd;  // first of the 4 columns
        if (row_ok && col < params.head_dim) {
          *reinterpret_cast<uint2*>(out_row + col) = odd ? make_uint2(got, a1) : make_uint2(a0, got);
        }
      }
    }
  }

  // 16 bytes a thread-instruction (Traits::kOStoreBytes == 16): a thread holds column pairs
  // (col, col + 1) of every 8-column group of its rows, the quad's four threads one pair each, so
  // the quad transposes its pairs four groups at a time (two butterfly rounds of __shfl_xor_sync),
  // after which each thread holds one group's 8 columns and stores them with one st.global.v4:
  // a warp writes 8 rows x 64 contiguous bytes per instruction instead of 8 rows x 16. Needs O's
  // rows 16-byte aligned and head_dim % 8 == 0 (the host refuses otherwise; staging.h gives
  // every API call both). 0 spills at d64, d128 and d256 (ptxas, v13; v11's d256 spills predate the
  // shared convert-then-store preamble above).
  template <class RowsCols, class Coords>
  __forceinline__ __device__ static void store_rows_16b(Params const& params, RowsCols const& rO_rc,
                                                        Coords const& tOcO_rc, Element* out, int row0, int seqlen_q,
                                                       int thread_idx) {
    using namespace cute;
    static_assert(sizeof(Element) == 2, "16-bit O");
    constexpr int kRows = decltype(size<0>(rO_rc))::value;
    constexpr int kGroups = decltype(size<1>(rO_rc))::value / 2;  // 8-column groups, one pair each
    static_assert(kGroups % 4 == 0, "groups transposed four at a time");
    const int quad_lane = thread_idx % 4;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      // Every lane shuffles, the row check comes after: a quad's lanes share a row, but the warp's
      // eight quads hold eight rows and __shfl_xor_sync needs all 32 lanes.
      const int row = row0 + get<0>(tOcO_rc(r, 0));
      const bool row_ok = row >= 0 && row < seqlen_q;
      Element* out_row = out + int64_t(row) * params.o_row_stride;
      CUTE_UNROLL
      for (int g = 0; g < kGroups / 4; ++g) {
        uint32_t pairs[4];  // pair i of groups 4g..4g+3 (this lane's columns of each)
        CUTE_UNROLL
        for (int i = 0; i < 4; ++i) {
          const ElementPair pair{rO_rc(r, 2 * (4 * g + i)), rO_rc(r, 2 * (4 * g + i) + 1)};
          pairs[i] = reinterpret_cast<uint32_t const&>(pair);
        }
        // 4 x 4 transpose across the quad with static indices: the round on lane bit m swaps,
        // within each index pair (i, i + m), the element whose index bit differs from the lane's.
        CUTE_UNROLL
        for (int m = 1; m <= 2; m *= 2) {
          const bool upper = (quad_lane & m) != 0;
          CUTE_UNROLL
          for (int i = 0; i < 4; ++i) {
            if (i & m) continue;
            const uint32_t got = __shfl_xor_sync(0xffffffffu, upper ? pairs[i] : pairs[i + m], m);
            if (upper) {
              pairs[i] = got;
            } else {
              pairs[i + m] = got;
            }
          }
        }
        // pairs[i] is now pair i of group 4g + quad_lane: its 8 columns in order.
        const int col = get<1>(tOcO_rc(r, 2 * (4 * g + quad_lane))) - 2 * quad_lane;
        if (row_ok && col < params.head_dim) {
          *reinterpret_cast<uint4*>(out_row + col) = make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
        }
      }
    }
  }

  template <int kRows>
  __forceinline__ __device__ static void store_lse(Params const& params, float const (&lse)[kRows], FwdTile const& tile,
                                                   FwdSequence<Traits> const& seq, int thread_idx) {
    using namespace cute;
    typename Traits::TiledMmaPV mma_pv;
    Tensor tOcO = mma_pv.get_thread_slice(thread_idx).partition_C(
        make_identity_tensor(select<0, 1>(typename Traits::TileShapePV{})));
    Tensor tOcO_rc = make_tensor(tOcO.data(), wgmma_acc_as_rows_cols(tOcO.layout()));  // (rows, d) -> (row, col)
    if (params.lse == nullptr || get<1>(tOcO_rc(0, 0)) != 0) return;
    const int row0 = tile.m_block * kBlockM - seq.row_offset;
    float* lse_out =
        params.lse + tile.batch * params.lse_batch_stride + tile.head * params.lse_head_stride + seq.row_q;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int row = row0 + get<0>(tOcO_rc(r, 0));
      if (row >= 0 && row < seq.seqlen_q) lse_out[row] = lse[r];
    }
  }
};

}  // namespace flashcore::cuda::sm90
