// Dropout in the sm90 backward (attention.h, "dropout"): the keep bits of a consumer thread's
// entries of Pᵀ and dPᵀ, from common/dropout.h's stream (the forward's, the CPU's and the
// reference's), and their use: dSᵀ = Pᵀ ∘ (Zᵀ ∘ dPᵀ - D) with Z = keep / (1 - p), and dV from
// Pᵀ ∘ keep (its 1 / (1 - p) goes onto dV once, at the end of the sweep).
//
// The stream's draws fit the forward's layout: one draw is the 16 entries a thread holds of an
// S tile (queries i, i + 8 along the wgmma's M; columns 2q, 2q + 1 of four 8-column groups of a
// 64-key group). The backward holds the transposes (keys along M, the warpgroup's 4 warps on
// 16-key slabs), so the 16 entries of one draw lie in all 4 warps (its word u in warp u) and a
// thread needs 2 bytes of each of 16 draws (kBlockM = 64): drawing them itself would cost 8 Philox
// calls per 16 entries, as much ALU as the rest of the step. Instead each warpgroup draws each draw
// of its 64 x kBlockM tile once (kBlockM / 32 a thread), while the Sᵀ and dPᵀ products run, puts
// the words in shared memory, syncs its 128 threads, and each thread reads its 16 (or 32) words,
// one conflict-free LDS each.
//
// Indices. A thread (warp w of its warpgroup, lane l) holds keys j = n0 + 64 wg + 16 w + l/4 + 8 h
// and queries i = m0 + 8 t + 2 (l % 4) + e (flat accumulator entry e + 2 h + 4 t). In the stream:
//   x = row_pair(i)     = (m0/16 + t/2) 8 + 2 (l % 4) + e
//   y = column_group(j) = ((n0/64 + wg) 4 + l/8) 2 + h
//   word (j % 64) / 16  = w,   byte ((i % 16) / 8) 2 + j % 2 = (t % 2) 2 + (l/4) % 2.
// Draw d of the tile (x, y as above, with c = l % 4 and g = l / 8) is stored as
// d = (((t/2 · 2 + h) 2 + e) 4 + g) 4 + c, word u at words[u · kDraws + d]: writers take
// consecutive d (consecutive banks), and a warp's readers read 16 consecutive d per LDS (lanes
// l, l ^ 4 share one: a broadcast).
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "common/dropout.h"
#include "cuda/common/dropout.h"

namespace flashcore::cuda::sm90 {

template <int kBlockM>
struct BwdDropout {
  static_assert(kBlockM % 32 == 0);
  static constexpr int kDraws = 4 * kBlockM;            // per warpgroup tile: 64 x kBlockM / 16
  static constexpr int kDrawsPerThread = kDraws / 128;  // 2 at kBlockM = 64
  static constexpr int kWords = 4 * kDraws;             // shared memory words per warpgroup
  static constexpr int kEntries = kBlockM / 2;          // a thread's entries of the Sᵀ tile
  static constexpr int kBitWords = (kEntries + 31) / 32;

  DropoutStream stream;
  std::uint32_t keep_max;
  float scale;  // 1 / (1 - p)

  template <class Params>
  __forceinline__ __device__ BwdDropout(Params const& params, int batch, int head)
      : stream(dropout_stream(params, batch, head)), keep_max(params.dropout_keep_max), scale(params.dropout_scale) {}

  // The warpgroup's draws of tile (m0, n0 + 64 wg) into `words` (this warpgroup's kWords), by its
  // 128 threads (wg_thread = 0..127). The caller syncs the warpgroup before read().
  __forceinline__ __device__ void draw(std::uint32_t* words, int m0, int n0, int wg, int wg_thread) const {
    CUTE_UNROLL
    for (int k = 0; k < kDrawsPerThread; ++k) {
      const int d = wg_thread + 128 * k;
      const int c = d % 4, g = (d / 4) % 4, e = (d / 16) % 2, h = (d / 32) % 2, t2 = d / 64;
      const std::uint32_t x = static_cast<std::uint32_t>((m0 / 16 + t2) * 8 + 2 * c + e);
      const std::uint32_t y = static_cast<std::uint32_t>(((n0 / 64 + wg) * 4 + g) * 2 + h);
      const Philox4x32 r = stream.draw(x, y);
      words[0 * kDraws + d] = r.x;
      words[1 * kDraws + d] = r.y;
      words[2 * kDraws + d] = r.z;
      words[3 * kDraws + d] = r.w;
    }
  }

  // This thread's keep bits (bit e + 2 h + 4 t: flat entry of the Sᵀ accumulator), from the
  // warpgroup's words (after the warpgroup has synced on draw()).
  __forceinline__ __device__ void read(std::uint32_t const* words, int warp_in_wg, int lane,
                                       std::uint32_t (&bits)[kBitWords]) const {
    const int c = lane % 4, g = lane / 8, b = (lane / 4) % 2;
    std::uint32_t const* mine = words + warp_in_wg * kDraws;
    CUTE_UNROLL
    for (int w = 0; w < kBitWords; ++w) bits[w] = 0;
    CUTE_UNROLL
    for (int t2 = 0; t2 < kBlockM / 16; ++t2) {
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        CUTE_UNROLL
        for (int e = 0; e < 2; ++e) {
          const std::uint32_t word = mine[(((t2 * 2 + h) * 2 + e) * 4 + g) * 4 + c] >> (8 * b);
          CUTE_UNROLL
          for (int ti = 0; ti < 2; ++ti) {  // t = 2 t2 + ti: byte ti * 2 + b
            const std::uint32_t byte = (word >> (16 * ti)) & 0xffu;
            const int flat = e + 2 * h + 4 * (2 * t2 + ti);
            bits[flat / 32] |= static_cast<std::uint32_t>(byte <= keep_max) << (flat % 32);
          }
        }
      }
    }
  }

  __forceinline__ __device__ static bool kept(std::uint32_t const (&bits)[kBitWords], int flat) {
    return (bits[flat / 32] >> (flat % 32)) & 1u;
  }

  // dSᵀ = Pᵀ ∘ (Zᵀ ∘ dPᵀ - D) into dP's registers, then Pᵀ ∘ keep (for dV). `dsum_of(i)` is D of
  // flat entry i's query.
  template <class TensorP, class TensorDP, class DsumOf>
  __forceinline__ __device__ void apply(std::uint32_t const (&bits)[kBitWords], TensorP& tSrS, TensorDP& tdPrdP,
                                        DsumOf const& dsum_of) const {
    static_assert(decltype(cute::size(tSrS))::value == kEntries);
    CUTE_UNROLL
    for (int i = 0; i < kEntries; ++i) {
      const bool keep = kept(bits, i);
      tdPrdP(i) = tSrS(i) * ((keep ? tdPrdP(i) * scale : 0.0f) - dsum_of(i));
      tSrS(i) = keep ? tSrS(i) : 0.0f;
    }
  }
};

}  // namespace flashcore::cuda::sm90
