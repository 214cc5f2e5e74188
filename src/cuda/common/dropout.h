// Dropout on register tiles of probabilities (attention.h, "dropout"), for kernels whose tiles are
// mma.sync m16n8 accumulators (wgmma's hold the same pattern): the keep bits of the entries a
// thread holds, drawn from common/dropout.h's stream with one Philox4x32-10 call per 16 entries,
// then applied with a select per entry.
//
// The forward zeroes dropped entries of its converted 16-bit P (zero_dropped_pairs: three
// instructions per two entries, the 1 / (1 - p) folded into O once); the backward needs the bits
// twice (dP before dS, P after), so it keeps them in a register or two (keep_bits, apply).
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

// The stream of head `head` of batch entry `batch` (any params with ProblemParams' dropout fields).
template <class Params>
__forceinline__ __device__ DropoutStream dropout_stream(const Params& params, int batch, int head) {
  DropoutStream stream;
  stream.key0 = static_cast<std::uint32_t>(params.dropout_seed);
  stream.key1 = static_cast<std::uint32_t>(params.dropout_seed >> 32);
  stream.head = static_cast<std::uint32_t>(batch) * static_cast<std::uint32_t>(params.heads_q) +
                static_cast<std::uint32_t>(head);
  stream.offset = params.dropout_offset;
  return stream;
}

struct TileDropout {
  DropoutStream stream;
  std::uint32_t keep_max;

  __forceinline__ __device__ TileDropout(const ProblemParams& params, int batch, int head)
      : stream(dropout_stream(params, batch, head)), keep_max(params.dropout_keep_max) {}

  // Calls visit(m, n, word) once for each (m, n) of the thread's entries, `word` the draw's 32 bits
  // holding their four bytes: byte h * 2 + e is entry (row h + 2 m, column e + 2 n) of the rows-cols
  // view. One Philox call per (m, 64-column group, 8-column-group parity).
  template <int kRowStep, int kColStep, int kRows, int kCols, class Visit>
  __forceinline__ __device__ void for_each_word(int row_first, int col_first, Visit&& visit) const {
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
            visit(m, n, philox_word(draw, static_cast<int>((t_first + k % 8) / 2)));
          }
        }
      }
    }
  }

  // Bit (r + kRows * c) of `bits`: whether entry (r, c) of the thread's rows-cols view is kept.
  template <int kRowStep, int kColStep, int kRows, int kCols>
  __forceinline__ __device__ void keep_bits(std::uint32_t (&bits)[(kRows * kCols + 31) / 32], int row_first,
                                            int col_first) const {
    CUTE_UNROLL
    for (int w = 0; w < (kRows * kCols + 31) / 32; ++w) bits[w] = 0;
    for_each_word<kRowStep, kColStep, kRows, kCols>(row_first, col_first, [&](int m, int n, std::uint32_t word) {
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        CUTE_UNROLL
        for (int e = 0; e < 2; ++e) {
          const std::uint32_t byte = (word >> (8 * (h * 2 + e))) & 0xffu;
          const int index = (h + 2 * m) + kRows * (e + 2 * n);
          bits[index / 32] |= static_cast<std::uint32_t>(byte <= keep_max) << (index % 32);
        }
      }
    });
  }

  // Zeroes the dropped entries of a 16-bit register fragment in the accumulator's flat layout
  // ((2 cols, 2 rows), MMA_M, MMA_N), seen as 32-bit pairs (the two columns of one row): per pair,
  // the two bytes go to the 16-bit lanes of a word (one PRMT), one packed compare as f16x2 gives
  // 0xffff where kept (bytes are nonnegative f16 subnormals, which order like the integers, the
  // trick flash_attn uses), and one AND applies it: three instructions for two entries.
  template <int kRowStep, int kColStep, int kRows, int kCols, class TensorPairs>
  __forceinline__ __device__ void zero_dropped_pairs(TensorPairs& pairs, int row_first, int col_first) const {
    constexpr int kM = kRows / 2;
    const std::uint32_t threshold = keep_max | (keep_max << 16);
    for_each_word<kRowStep, kColStep, kRows, kCols>(row_first, col_first, [&](int m, int n, std::uint32_t word) {
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        const std::uint32_t lanes = __byte_perm(word, 0u, h == 0 ? 0x4140u : 0x4342u);
        std::uint32_t mask;
        asm("set.le.u32.f16x2 %0, %1, %2;" : "=r"(mask) : "r"(lanes), "r"(threshold));
        pairs(h + 2 * (m + kM * n)) &= mask;
      }
    });
  }

  // The backward's one pass over the draws: entries of the fp32 accumulator `acc` (flat layout
  // ((2 cols, 2 rows), MMA_M, MMA_N)) whose probability is dropped become 0, kept ones are
  // multiplied by `factor`, and `bits` records the mask as keep_bits does (for P, after dS). Per pair
  // of columns one PRMT and one packed compare give 0xffff per kept lane; per entry one PRMT widens
  // its lane and one AND applies it.
  template <int kRowStep, int kColStep, int kRows, int kCols, class TensorAcc>
  __forceinline__ __device__ void mask_and_keep_bits(TensorAcc& acc, float factor,
                                                     std::uint32_t (&bits)[(kRows * kCols + 31) / 32],
                                                     int row_first, int col_first) const {
    constexpr int kM = kRows / 2;
    const std::uint32_t threshold = keep_max | (keep_max << 16);
    CUTE_UNROLL
    for (int w = 0; w < (kRows * kCols + 31) / 32; ++w) bits[w] = 0;
    for_each_word<kRowStep, kColStep, kRows, kCols>(row_first, col_first, [&](int m, int n, std::uint32_t word) {
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        const std::uint32_t lanes = __byte_perm(word, 0u, h == 0 ? 0x4140u : 0x4342u);
        std::uint32_t mask;
        asm("set.le.u32.f16x2 %0, %1, %2;" : "=r"(mask) : "r"(lanes), "r"(threshold));
        CUTE_UNROLL
        for (int e = 0; e < 2; ++e) {
          const std::uint32_t wide = __byte_perm(mask, 0u, e == 0 ? 0x1010u : 0x3232u);
          const int flat = e + 2 * h + 4 * (m + kM * n);
          acc(flat) = __uint_as_float(__float_as_uint(acc(flat)) & wide) * factor;
          const int index = (h + 2 * m) + kRows * (e + 2 * n);
          bits[index / 32] |= (wide & 1u) << (index % 32);
        }
      }
    });
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
