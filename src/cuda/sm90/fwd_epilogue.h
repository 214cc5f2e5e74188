// The forward epilogue: O (fp32 registers) -> 16-bit -> global memory, and the LSE rows from the
// column-0 threads. Two paths:
//
// Through shared memory (Traits::kStoreOViaSmem, the call's O TMA-addressable, and the
// warpgroup's rows starting inside the tensor): each consumer warpgroup writes its 64 rows of O
// (stmatrix) into its own rows of the tile's Q buffer (its last QK^T has completed, and no other
// warpgroup reads those rows), one thread issues the TMA stores and waits only until they have
// read shared memory, then releases Q's buffer for the next tile's Q; the warpgroup is back at
// the next tile's GEMMs while the bytes drain to HBM. TMA clips rows past seqlen_q and columns
// past head_dim, as the direct path's bounds checks do. No tile enables it yet (fwd_tile_size.h;
// tuning log v11 has the measurements and what is left to validate).
//
// Directly from registers (every other kernel and call: an O TMA cannot address, variable-length
// batches): 4, 8 or 16 bytes a thread-instruction (FwdTileSize::o_store_bytes; the wider ones
// shuffle within each quad first), rows outside [0, seqlen_q) of the tile's sequence
// (fwd_sequence.h: a varlen tile's rows past it belong to the next sequence) and columns past the
// real head_dim left unwritten. No shared memory and no barrier: Q's buffer is released right after the last
// QK^T (fwd_mainloop.h), or, in kernels that could have staged O in it, at the start of this
// epilogue. With 4-byte stores this path took 2.0 us (d128) / 6.5 us (d256) per tile at 2k keys
// with no wgmma issued meanwhile (tuning log v10).
#pragma once

#include <cute/arch/copy_sm90.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/numeric_conversion.h>

#include "cuda/sm90/fragment.h"
#include "cuda/sm90/fwd_sequence.h"
#include "cuda/sm90/named_barrier.h"
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

  // q_smem: the tile's Q buffer, (kBlockM, d) in Traits::SmemLayoutQ; q_empty: its "consumers are
  // done with it" barrier (one arrival per consumer warp), which the smem path arrives on.
  template <class FragO, int kRows>
  __forceinline__ __device__ static void store(Params const& params, FragO const& tOrO, float const (&lse)[kRows],
                                               FwdTile const& tile, int thread_idx, Element* q_smem,
                                               uint64_t* q_empty) {
    if constexpr (Traits::kStoreOViaSmem) {
      // A box may not start above the tensor: on the H100 a TMA store from a negative row (the
      // first m_block of a causal grid whose seqlen_q is not a multiple of kBlockM) stopped the
      // kernel with an illegal instruction (v11). Such a warpgroup's rows go out directly.
      const int wg_row0 = tile.m_block * kBlockM - params.row_offset + 64 * (thread_idx / 128);
      if (params.o_via_smem && wg_row0 >= 0) {  // dense calls only (fwd_o_tma_addressable)
        store_o_via_smem(params, tOrO, tile, thread_idx, q_smem, q_empty);
        store_lse(params, lse, tile, FwdSequence<Traits>(params, tile.batch), thread_idx);
        return;
      }
      // The mainloop of these kernels leaves Q's buffer to the epilogue; the direct stores do not
      // touch it, so it is free now (one arrival per consumer warp, as the mainloop would).
      if (cutlass::canonical_lane_idx() == 0) cutlass::arch::ClusterBarrier::arrive(q_empty);
    }
    const FwdSequence<Traits> seq(params, tile.batch);
    store_o_direct(params, tOrO, tile, seq, thread_idx);
    store_lse(params, lse, tile, seq, thread_idx);
  }

 private:
  template <class FragO>
  __forceinline__ __device__ static void store_o_via_smem(Params const& params, FragO const& tOrO, FwdTile const& tile,
                                                          int thread_idx, Element* q_smem, uint64_t* q_empty) {
    using namespace cute;
    constexpr int kWarpgroupThreads = 128;
    const int wg = thread_idx / kWarpgroupThreads;
    // The accumulator's fragment written with stmatrix (four 8 x 8 16-bit matrices a warp per
    // instruction) into the (M, d) tile in Q's swizzled layout: this thread's rows only. Converted
    // to 16-bit one stmatrix at a time: a whole converted copy beside the fp32 O (d/2 + d/4
    // registers at d256) spilled in the causal zig-zag d256 kernel.
    Tensor sO = make_tensor(make_smem_ptr(q_smem), typename Traits::SmemLayoutQ{});  // (M, d)
    auto smem_copy_o = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, Element>{}, typename Traits::TiledMmaPV{});
    auto thr_copy_o = smem_copy_o.get_thread_slice(thread_idx);
    Tensor tOrO_copy = thr_copy_o.retile_S(tOrO);  // ((Atom, AtomNum), MMA_M, MMA_N) fp32
    Tensor tOsO = thr_copy_o.partition_D(sO);      // ((Atom, AtomNum), PIPE_M, PIPE_N)
    cutlass::NumericArrayConverter<Element, float, 2> to_element;
    CUTE_UNROLL
    for (int n = 0; n < size<2>(tOrO_copy); ++n) {
      Tensor src = tOrO_copy(_, _, n);
      Tensor chunk = make_fragment_like<Element>(src);
      CUTE_UNROLL
      for (int i = 0; i < size(src); i += 2) {
        cutlass::Array<float, 2> pair;
        pair[0] = src(i);
        pair[1] = src(i + 1);
        const cutlass::Array<Element, 2> converted = to_element(pair);
        chunk(i) = converted[0];
        chunk(i + 1) = converted[1];
      }
      copy(smem_copy_o, chunk, tOsO(_, _, n));
    }
    // The generic-proxy writes become visible to the TMA (async proxy), then the warpgroup's 128
    // threads meet so that one thread may store all of its rows.
    cutlass::arch::fence_view_async_shared();
    named_barrier_sync(kWarpgroupThreads, FwdNamedBarrier(int(FwdNamedBarrier::kEpilogueWG1) + wg));
    if (thread_idx % kWarpgroupThreads == 0) {
      // Rows in the tensor's frame (causal grids start row_offset rows above it; TMA skips rows < 0).
      Tensor mO = domain_offset(make_coord(-params.row_offset, _0{}),
                                params.tma_o.get_tma_tensor(params.shape_q)(_, _, tile.head, tile.batch));  // (seqlen_q, d)
      // Q's layout tiles its 8 x 64 swizzle atoms down the rows first: columns [64 j, 64 j + 64) of
      // rows [64 wg, 64 wg + 64) are one dense (64, 64) box at j * kBlockM * 64 + wg * 64 * 64.
      CUTE_UNROLL
      for (int j = 0; j < kHeadDim / 64; ++j) {
        Tensor sBox = make_tensor(make_smem_ptr(q_smem + j * kBlockM * 64 + wg * 64 * 64),
                                  typename Traits::SmemLayoutOBox{});  // (64, 64)
        Tensor gBox = local_tile(mO, Shape<_64, _64>{}, make_coord(tile.m_block * Traits::kConsumerWGs + wg, j));  // (64, 64)
        auto parts = tma_partition(params.tma_o, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sBox), group_modes<0, 2>(gBox));
        copy(params.tma_o, get<1>(parts), get<0>(parts));
      }
      tma_store_arrive();
      // Only the smem reads are waited for: the next tile's Q may then overwrite the buffer while
      // the writes to global memory complete on their own.
      tma_store_wait<0>();
      constexpr int kWarps = kWarpgroupThreads / 32;
      CUTE_UNROLL
      for (int w = 0; w < kWarps; ++w) cutlass::arch::ClusterBarrier::arrive(q_empty);
    }
  }

  // What every direct store needs: all of O in 16-bit first (the fp32 accumulator then dies; the
  // wider stores' shuffles hold packed pairs only), as (rows, d) with each element's (row, col),
  // the (batch, head) slice of O and the tile's first row; then the store loop of the tile's width.
  template <class FragO>
  __forceinline__ __device__ static void store_o_direct(Params const& params, FragO const& tOrO, FwdTile const& tile,
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
  // 16-byte stores: the d256 kernels fit without spilling (but the causal zig-zag one).
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
  // every API call both). The d256 kernels spill 24-48 B with it (v11), d128 none.
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
