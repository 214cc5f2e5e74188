// The split-KV decode kernel: attention of a few query rows against a (contiguous or paged) KV
// cache, plain FP32 FMAs on cp.async-staged tiles, so it runs on every GPU from sm80 on.
//
// One CTA serves one (split, kv head x row block, sequence). GQA packing: the kRows rows of a CTA
// are the query heads sharing its kv head times the query positions, so one pass over the keys
// serves all of them and each KV byte is read once per step. Layout of the work (decode_traits.h):
// thread (group g, lane c) holds columns [8c, 8c + 8) of every row's q and output; it scores keys
// g, g + kGroups, ... of each tile with a 16-byte K chunk and kLanesPerRow-wide shuffles, keeps its
// group's online softmax, and accumulates P V from its V chunks. The groups merge at the end; with
// several splits the merged (output, LSE) of the split go to the workspace and decode_combine.h
// merges the splits.
//
// Reads scheduler (which keys) -> mainloop (tiles) -> epilogue (merge, store).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/params.h"
#include "cuda/sm80/decode_epilogue.h"
#include "cuda/sm80/decode_schedule.h"
#include "cuda/sm80/decode_traits.h"

namespace flashcore::cuda::sm80 {


template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads) decode_kernel(const __grid_constant__ DecodeParams p) {
  using Element = typename Traits::Element;
  constexpr int kRows = Traits::kRows;
  constexpr int kLanes = Traits::kLanesPerRow;
  constexpr int kGroups = Traits::kGroups;
  constexpr int kKeys = Traits::kKeysPerGroup;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr int kHeadDim = Traits::kHeadDim;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Element* smem = reinterpret_cast<Element*>(smem_raw);

  const int split = blockIdx.x;
  const int num_splits = gridDim.x;
  const int m_blocks = (p.group_size * p.seqlen_q + kRows - 1) / kRows;
  const int hk = blockIdx.y / m_blocks;
  const int row0 = (blockIdx.y % m_blocks) * kRows;
  const int b = blockIdx.z;
  const int lane = threadIdx.x % kLanes;  // column chunk
  const int group = threadIdx.x / kLanes;
  const int col = lane * 8;
  const bool col_valid = col < p.head_dim;
  const int rows_total = p.group_size * p.seqlen_q;

  // ---- scheduler ----
  const decode::DecodeWork w = decode::schedule<kBlockN>(p, b, split, num_splits);

  // ---- q: this thread's 8 columns of each packed row, rotated (rounded to the dtype as the cache
  // holds keys) ----
  float q[kRows][8];
#pragma unroll
  for (int m = 0; m < kRows; ++m) decode::load_q8<Element>(p, b, hk, row0 + m, col, w.seqlen_end_cache_len, q[m]);
  float slope[kRows];
#pragma unroll
  for (int m = 0; m < kRows; ++m) {
    const int h = hk * p.group_size + min(row0 + m, rows_total - 1) / p.seqlen_q;
    slope[m] = p.alibi_slopes == nullptr ? 0.0f : p.alibi_slopes[b * p.alibi_batch_stride + h];
  }

  // ---- mainloop: tiles of kBlockN keys, two stages in flight ----
  const Element* k_base = static_cast<const Element*>(p.k_cache) + hk * p.k_cache_strides.head + col;
  const Element* v_base = static_cast<const Element*>(p.v_cache) + hk * p.v_cache_strides.head + col;
  const auto load_tile = [&](int tile, int stage) {
    Element* sk = smem + stage * 2 * Traits::kTileElems;
    Element* sv = sk + Traits::kTileElems;
#pragma unroll
    for (int k = 0; k < kKeys; ++k) {
      const int n = group + k * kGroups;
      std::int64_t k_off = 0, v_off = 0;
      const bool valid = col_valid && decode::kv_offsets(p, w, b, tile * kBlockN + n, &k_off, &v_off);
      decode::cp_async_16(sk + n * kHeadDim + col, valid ? k_base + k_off : k_base, valid);
      decode::cp_async_16(sv + n * kHeadDim + col, valid ? v_base + v_off : v_base, valid);
    }
  };

  float acc[kRows][8];
  float row_max[kRows], row_sum[kRows];
#pragma unroll
  for (int m = 0; m < kRows; ++m) {
    row_max[m] = -INFINITY;
    row_sum[m] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[m][e] = 0.0f;
  }
  const decode::ScoreRule rule = decode::score_rule(p, w);

#pragma unroll
  for (int s = 0; s < Traits::kStages - 1; ++s) {
    if (w.tile_begin + s < w.tile_end) load_tile(w.tile_begin + s, s);
    decode::cp_async_commit();
  }
  for (int tile = w.tile_begin; tile < w.tile_end; ++tile) {
    const int ahead = tile + Traits::kStages - 1;
    if (ahead < w.tile_end) load_tile(ahead, (ahead - w.tile_begin) % Traits::kStages);
    decode::cp_async_commit();
    decode::cp_async_wait<Traits::kStages - 1>();  // this thread's chunks of `tile` have landed
    const Element* sk = smem + ((tile - w.tile_begin) % Traits::kStages) * 2 * Traits::kTileElems;
    const Element* sv = sk + Traits::kTileElems;

    // Scores of this group's keys: partial dots over 8 columns, summed across the row's lanes.
    float s[kKeys][kRows];
#pragma unroll
    for (int k = 0; k < kKeys; ++k) {
      float kf[8];
      decode::to_float8<Element>(*reinterpret_cast<const uint4*>(sk + (group + k * kGroups) * kHeadDim + col), kf);
#pragma unroll
      for (int m = 0; m < kRows; ++m) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) dot = fmaf(q[m][e], kf[e], dot);
#pragma unroll
        for (int offset = kLanes / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        s[k][m] = dot;
      }
    }
    // Score options and the mask, in log2 units. Tiles every row sees whole skip the mask.
    const int n0 = tile * kBlockN;
    const bool needs_mask = n0 < w.lo_all || n0 + kBlockN > w.hi_all;
#pragma unroll
    for (int k = 0; k < kKeys; ++k)
#pragma unroll
      for (int m = 0; m < kRows; ++m)
        s[k][m] = rule(s[k][m], (row0 + m) % p.seqlen_q, n0 + group + k * kGroups, slope[m], needs_mask);
    // The group's online softmax over this tile.
#pragma unroll
    for (int m = 0; m < kRows; ++m) {
      float tile_max = row_max[m];
#pragma unroll
      for (int k = 0; k < kKeys; ++k) tile_max = fmaxf(tile_max, s[k][m]);
      // A row that has seen only masked keys keeps max -inf; subtract 0 then so exp2 gives 0, not NaN.
      const float base = tile_max == -INFINITY ? 0.0f : tile_max;
      const float rescale = exp2f(row_max[m] - base);
      row_max[m] = tile_max;
      row_sum[m] *= rescale;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[m][e] *= rescale;
#pragma unroll
      for (int k = 0; k < kKeys; ++k) {
        s[k][m] = exp2f(s[k][m] - base);
        row_sum[m] += s[k][m];
      }
    }
    // P V over this thread's 8 columns.
#pragma unroll
    for (int k = 0; k < kKeys; ++k) {
      float vf[8];
      decode::to_float8<Element>(*reinterpret_cast<const uint4*>(sv + (group + k * kGroups) * kHeadDim + col), vf);
#pragma unroll
      for (int m = 0; m < kRows; ++m)
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[m][e] = fmaf(s[k][m], vf[e], acc[m][e]);
    }
  }
  decode::cp_async_wait<0>();
  __syncthreads();  // every thread is done with the pipeline's shared memory

  // ---- epilogue: merge the groups' softmaxes, then store the output (or the split's partial) ----
  float* merge_o = reinterpret_cast<float*>(smem_raw);            // (kGroups, kRows, kHeadDim)
  float* merge_ml = merge_o + kGroups * kRows * kHeadDim;          // (kGroups, kRows, 2)
#pragma unroll
  for (int m = 0; m < kRows; ++m) {
#pragma unroll
    for (int e = 0; e < 8; ++e) merge_o[(group * kRows + m) * kHeadDim + col + e] = acc[m][e];
    if (lane == 0) {
      merge_ml[(group * kRows + m) * 2] = row_max[m];
      merge_ml[(group * kRows + m) * 2 + 1] = row_sum[m];
    }
  }
  __syncthreads();
  decode_epilogue<Element, kHeadDim, kRows, kGroups, Traits::kThreads>(p, merge_o, merge_ml, b, hk, row0, split,
                                                                       num_splits);
}

}  // namespace flashcore::cuda::sm80
