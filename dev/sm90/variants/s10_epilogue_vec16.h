// Dev-only (issue 14, next step 1a of the tuning log's v10; NOT YET RUN on a GPU): the forward
// epilogue with 16-byte stores. The library's FwdEpilogue stores each thread's (col, col + 1)
// pair of every 8-column group (4 bytes): a warp's store instruction writes 8 rows x 16 bytes,
// half of each 32-byte sector. v10's timeline measured that epilogue at 2.0 us (d128) / 6.5 us
// (d256) per tile, with both consumer warpgroups in it at once and all 132 CTAs storing together.
// Here the four threads of a quad (the same two rows, the four column pairs of each 8-column
// group) transpose their pairs over every 4 groups (two butterfly stages of two shuffles), after
// which thread q holds all 8 columns (16 bytes) of group 4s + q and stores them with one
// st.global.v4. A warp's
// store then writes 8 rows x 64 contiguous bytes (whole sectors), with 4x fewer instructions.
// Prediction: the epilogue 6.5 -> 3.5-4.5 us at d256, 2.0 -> 1.2-1.5 us at d128 if the L2 sector
// writes are the limit; nothing if it is HBM write bandwidth (the O bytes are the same).
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>
#include <cutlass/numeric_conversion.h>

#include "cuda/sm90/fragment.h"
#include "cuda/sm90/tile_scheduler.h"

namespace fc_dev_timeline {

template <class Traits>
struct FwdEpilogueVec16 {
  using Element = typename Traits::Element;
  using Params = typename Traits::Params;
  static constexpr int kBlockM = Traits::kBlockM;
  static_assert(sizeof(Element) == 2, "16-bit O");

  template <class FragO, int kRows>
  __forceinline__ __device__ static void store(Params const& params, FragO const& tOrO, float const (&lse)[kRows],
                                               flashcore::cuda::sm90::FwdTile const& tile, int thread_idx) {
    using namespace cute;
    using flashcore::cuda::sm90::wgmma_acc_as_rows_cols;
    typename Traits::TiledMmaPV mma_pv;
    auto thr_pv = mma_pv.get_thread_slice(thread_idx);
    // Converted pair by pair as the stores go (not all of O up front: with a converted copy beside
    // the fp32 accumulator the d256 kernel spilled 28 B).
    Tensor tOrO_rc = make_tensor(tOrO.data(), wgmma_acc_as_rows_cols(tOrO.layout()));  // (rows, d) fp32
    cutlass::NumericArrayConverter<Element, float, 2> to_element;
    Tensor tOcO = thr_pv.partition_C(make_identity_tensor(select<0, 1>(typename Traits::TileShapePV{})));
    Tensor tOcO_rc = make_tensor(tOcO.data(), wgmma_acc_as_rows_cols(tOcO.layout()));  // (rows, d) -> (row, col)
    constexpr int kCols = decltype(size<1>(tOrO_rc))::value;  // this thread's columns of a row
    constexpr int kGroups = kCols / 2;                       // 8-column groups (one pair each)
    static_assert(kGroups % 4 == 0, "groups transposed four at a time");

    Element* out = static_cast<Element*>(params.out) + tile.batch * params.o_batch_stride +
                   tile.head * params.o_head_stride;
    const int row0 = tile.m_block * kBlockM - params.row_offset;
    const int q = thread_idx % 4;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      // Every lane shuffles (the row check comes after): the quad's lanes share the row, but a
      // warp holds 8 rows and __shfl_xor_sync needs all 32 lanes.
      const int row = row0 + get<0>(tOcO_rc(r, 0));
      const bool row_ok = row >= 0 && row < params.seqlen_q;
      Element* out_row = out + int64_t(row) * params.o_row_stride;
      CUTE_UNROLL
      for (int s = 0; s < kGroups / 4; ++s) {
        uint32_t b[4];
        CUTE_UNROLL
        for (int i = 0; i < 4; ++i) {
          cutlass::Array<float, 2> pair;
          pair[0] = tOrO_rc(r, 2 * (4 * s + i));
          pair[1] = tOrO_rc(r, 2 * (4 * s + i) + 1);
          const cutlass::Array<Element, 2> converted = to_element(pair);
          b[i] = reinterpret_cast<uint32_t const&>(converted);
        }
        // 4 x 4 transpose across the quad (lane q holds pair q of groups 4s..4s+3) as two
        // butterfly stages, static indices: the stage on lane bit m swaps, within each index
        // pair (i, i + m), the element whose index bit differs from the lane's bit.
        CUTE_UNROLL
        for (int m = 1; m <= 2; m *= 2) {
          const bool upper = (q & m) != 0;
          CUTE_UNROLL
          for (int i = 0; i < 4; ++i) {
            if (i & m) continue;
            const uint32_t got = __shfl_xor_sync(0xffffffffu, upper ? b[i] : b[i + m], m);
            if (upper) {
              b[i] = got;
            } else {
              b[i + m] = got;
            }
          }
        }
        // Now b[i] = pair i of group 4s + q: its 8 columns in order.
        const int col = get<1>(tOcO_rc(r, 2 * (4 * s + q))) - 2 * q;  // first column of the group
        if (!row_ok) continue;
        // Whole 16-byte groups only: s10_timeline_vec16.cu refuses a head_dim that is not a multiple
        // of 8 and an O whose base or strides are not 16-byte aligned.
        if (col < params.head_dim) *reinterpret_cast<uint4*>(out_row + col) = make_uint4(b[0], b[1], b[2], b[3]);
      }
    }

    if (params.lse != nullptr && get<1>(tOcO_rc(0, 0)) == 0) {
      float* lse_out = params.lse + tile.batch * params.lse_batch_stride + tile.head * params.lse_head_stride;
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const int row = row0 + get<0>(tOcO_rc(r, 0));
        if (row >= 0 && row < params.seqlen_q) lse_out[row] = lse[r];
      }
    }
  }
};

}  // namespace fc_dev_timeline
