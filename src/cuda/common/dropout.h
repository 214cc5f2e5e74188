// Dropout on register tiles of probabilities (attention.h, "dropout"), for kernels whose tiles are
// mma.sync m16n8 accumulators (wgmma's hold the same pattern): the keep bits of the entries a
// thread holds, drawn from common/dropout.h's stream with one Philox4x32-10 call per 16 entries,
// then applied with a select per entry.
//
// A thread's entries, in the rows-cols view of fragment.h ((2 rows, MMA_M), (2 cols, MMA_N)), sit
// at row row_first + 8 h + kRowStep m and column col_first + e + kColStep n: kRowStep is 16 times
// the warps stacked along M, kColStep 8 times those along N. One draw covers rows h = 0, 1 of one
// m and the columns of one 64-column group whose 8-column group has one parity; the stream
// (attention.h) is laid out so that this is exactly one thread's set.
//
// Needs: row_first % 16 < 8 (tiles start on 16-row boundaries), col_first % 64 < kColStep (tiles
// start on 64-column boundaries), and kColStep in {8, 16, 32} so that a thread's 8-column groups
// stay within their 64-column group in the order the draw's words hold them.
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

#include "common/dropout.h"
#include "cuda/params.h"

namespace flashcore::cuda {

struct TileDropout {
  DropoutStream stream;
  std::uint32_t keep_max;

  __forceinline__ __device__ TileDropout(const ProblemParams& params, int batch, int head) {
    stream.key0 = static_cast<std::uint32_t>(params.dropout_seed);
    stream.key1 = static_cast<std::uint32_t>(params.dropout_seed >> 32);
    stream.head = static_cast<std::uint32_t>(batch) * static_cast<std::uint32_t>(params.heads_q) +
                  static_cast<std::uint32_t>(head);
    stream.offset = params.dropout_offset;
    keep_max = params.dropout_keep_max;
  }

  // Bit (r + kRows * c) of `bits`: whether entry (r, c) of the thread's rows-cols view is kept.
  template <int kRowStep, int kColStep, int kRows, int kCols>
  __forceinline__ __device__ void keep_bits(std::uint32_t (&bits)[(kRows * kCols + 31) / 32], int row_first,
                                            int col_first) const {
    static_assert(kRowStep % 16 == 0 && kRows % 2 == 0 && kCols % 2 == 0);
    static_assert(kColStep == 8 || kColStep == 16 || kColStep == 32);
    constexpr int kM = kRows / 2;
    constexpr int kN = kCols / 2;
    constexpr int kGroups = (kColStep * (kN - 1) / 8) / 8 + 1;  // 64-column groups the thread touches
    const std::uint32_t pair_first = DropoutStream::row_pair(static_cast<std::uint32_t>(row_first));
    const std::uint32_t q = (static_cast<std::uint32_t>(col_first) % 8) / 2;
    const std::uint32_t t_first = (static_cast<std::uint32_t>(col_first) % 64) / 8;  // < kColStep / 8
    const std::uint32_t group_first = static_cast<std::uint32_t>(col_first) / 64;
    CUTE_UNROLL
    for (int w = 0; w < (kRows * kCols + 31) / 32; ++w) bits[w] = 0;
    CUTE_UNROLL
    for (int m = 0; m < kM; ++m) {
      CUTE_UNROLL
      for (int g = 0; g < kGroups; ++g) {
        CUTE_UNROLL
        for (int parity = 0; parity < 2; ++parity) {
          // The n whose 8-column group k = kColStep n / 8 lies in group g with this parity (k % 2).
          bool used = false;
          CUTE_UNROLL
          for (int n = 0; n < kN; ++n) used |= (kColStep * n / 8) / 8 == g && (kColStep * n / 8) % 2 == parity;
          if (!used) continue;  // folds away: every term is a constant after unrolling
          const Philox4x32 draw = stream.draw(
              pair_first + static_cast<std::uint32_t>((kRowStep / 16) * 8 * m),
              ((group_first + g) * 4 + q) * 2 + (t_first + static_cast<std::uint32_t>(parity)) % 2);
          CUTE_UNROLL
          for (int n = 0; n < kN; ++n) {
            const int k = kColStep * n / 8;
            if (k / 8 != g || k % 2 != parity) continue;
            const std::uint32_t word = philox_word(draw, static_cast<int>((t_first + k % 8) / 2));
            CUTE_UNROLL
            for (int h = 0; h < 2; ++h) {
              CUTE_UNROLL
              for (int e = 0; e < 2; ++e) {
                const std::uint32_t byte = (word >> (8 * (h * 2 + e))) & 0xffu;
                const int index = (h + 2 * m) + kRows * (e + 2 * n);
                bits[index / 32] |= static_cast<std::uint32_t>(byte <= keep_max) << (index % 32);
              }
            }
          }
        }
      }
    }
  }

  // Entries of a rows-cols view whose bit is clear become 0, the rest are multiplied by `factor`
  // (1: the forward folds 1 / (1 - p) into its epilogue).
  template <int kRows, int kCols, class TensorRC>
  __forceinline__ __device__ static void apply(TensorRC& rc, const std::uint32_t (&bits)[(kRows * kCols + 31) / 32],
                                               float factor) {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      CUTE_UNROLL
      for (int c = 0; c < kCols; ++c) {
        const int index = r + kRows * c;
        const bool keep = (bits[index / 32] >> (index % 32)) & 1u;
        rc(r, c) = keep ? rc(r, c) * factor : 0.0f;
      }
    }
  }
};

}  // namespace flashcore::cuda
