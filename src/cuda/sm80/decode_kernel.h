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

#include "cuda/common/rotary.h"
#include "cuda/params.h"
#include "cuda/sm80/decode_traits.h"

namespace flashcore::cuda::sm80 {

namespace decode {

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_bytes = valid ? 16 : 0;  // 0: read nothing, write 16 zero bytes
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

template <typename Element>
__device__ __forceinline__ void to_float8(const uint4& raw, float (&out)[8]) {
  const Element* e = reinterpret_cast<const Element*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = static_cast<float>(e[i]);
}

__device__ __forceinline__ int index_at(const int* values, std::int64_t stride, int b, int fallback) {
  return values == nullptr ? fallback : values[b * stride];
}

// The keys one CTA reads (its scheduler): the sequence's extent in the cache, the key range its
// rows can see at all (causal / window prune whole tiles), and this split's share of its tiles.
struct DecodeWork {
  int seqlen_k;   // keys of the sequence: cache positions [leftpad, leftpad + seqlen_k)
  int leftpad;
  int cache_row;  // contiguous caches
  int seqlen_end_cache_len;  // cache_seqlens[b] (the rotary position of q)
  int tile_begin, tile_end;  // tiles of kBlockN keys, relative to leftpad
  int lo_all, hi_all;        // keys [lo_all, hi_all) every row sees (bounds of the unmasked tiles)
};

template <int kBlockN>
__device__ __forceinline__ DecodeWork schedule(const DecodeParams& p, int b, int split, int num_splits) {
  DecodeWork w;
  const int cache_len = index_at(p.cache_seqlens, p.cache_seqlens_stride, b, p.capacity);
  w.leftpad = index_at(p.cache_leftpad, p.cache_leftpad_stride, b, 0);
  w.cache_row = index_at(p.cache_batch_idx, p.cache_batch_idx_stride, b, b);
  w.seqlen_end_cache_len = cache_len;
  w.seqlen_k = max(0, cache_len + p.seqlen_new - w.leftpad);
  const int sk = w.seqlen_k;
  const int shift = sk - p.seqlen_q;  // row i's diagonal is key i + shift
  const int right = p.causal ? 0 : p.window_right;
  // Keys some row sees: [lo, hi); keys every row sees: [lo_all, hi_all).
  int lo = 0, hi = sk;
  w.lo_all = 0;
  w.hi_all = sk;
  if (p.window_left >= 0) {
    lo = max(0, shift - p.window_left);
    w.lo_all = max(0, p.seqlen_q - 1 + shift - p.window_left);
  }
  if (right >= 0) {
    hi = min(sk, p.seqlen_q - 1 + shift + right + 1);
    w.hi_all = max(0, min(sk, shift + right + 1));
  }
  w.tile_begin = w.tile_end = 0;
  if (hi > lo) {
    const int first = lo / kBlockN;
    const long long tiles = (hi - first * kBlockN + kBlockN - 1) / kBlockN;
    w.tile_begin = first + static_cast<int>(tiles * split / num_splits);
    w.tile_end = first + static_cast<int>(tiles * (split + 1) / num_splits);
  }
  return w;
}

}  // namespace decode

template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads) decode_kernel(const __grid_constant__ DecodeParams p) {
  using Element = typename Traits::Element;
  constexpr int kRows = Traits::kRows;
  constexpr int kLanes = Traits::kLanesPerRow;
  constexpr int kGroups = Traits::kGroups;
  constexpr int kKeys = Traits::kKeysPerGroup;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr int kHeadDim = Traits::kHeadDim;
  constexpr float kLog2e = 1.4426950408889634f;
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
  // holds keys) and scaled by softmax_scale ----
  float q[kRows][8];
#pragma unroll
  for (int m = 0; m < kRows; ++m) {
    const int r = row0 + m;
    const int h = hk * p.group_size + r / p.seqlen_q;
    const int i = r % p.seqlen_q;
#pragma unroll
    for (int e = 0; e < 8; ++e) q[m][e] = 0.0f;
    if (r >= rows_total || !col_valid) continue;
    const Element* q_row =
        static_cast<const Element*>(p.q) + b * p.q_strides.batch + i * p.q_strides.row + h * p.q_strides.head;
    const int pos = w.seqlen_end_cache_len + (p.rotate_q_per_row ? i : 0);
    const bool rotate = p.rotary_dim > 0 && pos < p.rotary_seqlen;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float x = static_cast<float>(q_row[col + e]);
      if (rotate) {
        x = rotated_element(q_row, col + e, static_cast<const Element*>(p.rotary_cos) + pos * p.rotary_cos_stride,
                            static_cast<const Element*>(p.rotary_sin) + pos * p.rotary_sin_stride, p.rotary_dim,
                            p.rotary_interleaved);
        x = static_cast<float>(static_cast<Element>(x));
      }
      q[m][e] = x * p.softmax_scale;
    }
  }

  float slope[kRows];
#pragma unroll
  for (int m = 0; m < kRows; ++m) {
    const int h = hk * p.group_size + min(row0 + m, rows_total - 1) / p.seqlen_q;
    slope[m] = p.alibi_slopes == nullptr ? 0.0f : p.alibi_slopes[b * p.alibi_batch_stride + h];
  }

  // ---- mainloop: tiles of kBlockN keys, two stages in flight ----
  const Element* k_base = static_cast<const Element*>(p.k_cache) + hk * p.k_cache_strides.head + col;
  const Element* v_base = static_cast<const Element*>(p.v_cache) + hk * p.v_cache_strides.head + col;
  const bool row_ok = p.block_table != nullptr || (w.cache_row >= 0 && w.cache_row < p.batch_cache);
  const auto load_tile = [&](int tile, int stage) {
    Element* sk = smem + stage * 2 * Traits::kTileElems;
    Element* sv = sk + Traits::kTileElems;
#pragma unroll
    for (int k = 0; k < kKeys; ++k) {
      const int n = group + k * kGroups;
      const int j = tile * kBlockN + n;
      const int pos = w.leftpad + j;
      bool valid = col_valid && row_ok && j < w.seqlen_k && pos < p.capacity;
      std::int64_t k_off = 0, v_off = 0;
      if (valid) {
        if (p.block_table != nullptr) {
          const int page = p.block_table[b * p.block_table_stride + pos / p.page_size];
          const int slot = pos % p.page_size;
          valid = page >= 0 && page < p.num_pages;  // guards even when the host skipped its check
          k_off = page * p.k_cache_strides.batch + slot * p.k_cache_strides.row;
          v_off = page * p.v_cache_strides.batch + slot * p.v_cache_strides.row;
        } else {
          k_off = w.cache_row * p.k_cache_strides.batch + pos * p.k_cache_strides.row;
          v_off = w.cache_row * p.v_cache_strides.batch + pos * p.v_cache_strides.row;
        }
      }
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
  const int shift = w.seqlen_k - p.seqlen_q;
  const float inv_softcap = p.softcap > 0.0f ? __frcp_rn(p.softcap) : 0.0f;
  const int right = p.causal ? 0 : p.window_right;

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
    // Score options and the mask, then log2 units. Tiles every row sees whole skip the mask.
    const int n0 = tile * kBlockN;
    const bool needs_mask = n0 < w.lo_all || n0 + kBlockN > w.hi_all;
    const bool score_mod = p.softcap > 0.0f || p.alibi_slopes != nullptr;
#pragma unroll
    for (int k = 0; k < kKeys; ++k) {
      const int j = n0 + group + k * kGroups;
#pragma unroll
      for (int m = 0; m < kRows; ++m) {
        const int i = (row0 + m) % p.seqlen_q;
        float x = s[k][m];
        if (score_mod) {
          if (p.softcap > 0.0f) x = p.softcap * tanhf(x * inv_softcap);
          x -= slope[m] * static_cast<float>(abs(i + shift - j));
        }
        x *= kLog2e;
        if (needs_mask) {
          const bool visible = j < w.seqlen_k && (p.window_left < 0 || j >= i + shift - p.window_left) &&
                               (right < 0 || j <= i + shift + right);
          if (!visible) x = -INFINITY;
        }
        s[k][m] = x;
      }
    }
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
  constexpr float kLn2 = 0.6931471805599453f;
  for (int task = threadIdx.x; task < kRows * kLanes; task += Traits::kThreads) {
    const int m = task / kLanes;
    const int c = (task % kLanes) * 8;
    const int r = row0 + m;
    if (r >= rows_total || c >= p.head_dim) continue;
    const int h = hk * p.group_size + r / p.seqlen_q;
    const int i = r % p.seqlen_q;
    float max_all = -INFINITY;
    for (int g = 0; g < kGroups; ++g) max_all = fmaxf(max_all, merge_ml[(g * kRows + m) * 2]);
    const float base = max_all == -INFINITY ? 0.0f : max_all;
    float sum = 0.0f;
    float o[8] = {};
    for (int g = 0; g < kGroups; ++g) {
      const float weight = exp2f(merge_ml[(g * kRows + m) * 2] - base);
      sum += weight * merge_ml[(g * kRows + m) * 2 + 1];
#pragma unroll
      for (int e = 0; e < 8; ++e) o[e] += weight * merge_o[(g * kRows + m) * kHeadDim + c + e];
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;  // no visible key: output 0
    const float lse = sum > 0.0f ? (max_all + log2f(sum)) * kLn2 : -INFINITY;
    if (num_splits == 1) {
      Element out8[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) out8[e] = static_cast<Element>(o[e] * inv);
      Element* dst = static_cast<Element*>(p.out) + b * p.o_strides.batch + i * p.o_strides.row + h * p.o_strides.head + c;
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(out8);
      if (c == 0 && p.lse != nullptr) p.lse[b * p.lse_strides.batch + h * p.lse_strides.head + i] = lse;
    } else {
      const std::int64_t row = ((static_cast<std::int64_t>(split) * p.batch + b) * p.heads_q + h) * p.seqlen_q + i;
      float* dst = p.o_accum + row * p.head_dim + c;
#pragma unroll
      for (int e = 0; e < 8; ++e) dst[e] = o[e] * inv;
      if (c == 0) p.lse_accum[row] = lse;
    }
  }
}

}  // namespace flashcore::cuda::sm80
