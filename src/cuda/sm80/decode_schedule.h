// What both decode kernels share before their math: cp.async helpers, the int32 index reads, and
// the scheduler that tells a CTA which keys it reads (its sequence's extent, the key range its rows
// see at all, its split's share of the tiles).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/common/rotary.h"
#include "cuda/params.h"

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
  int tile_step;             // 1: the split reads [tile_begin, tile_end); strided: every tile_step-th of them
  int lo_all, hi_all;        // keys [lo_all, hi_all) every row sees (bounds of the unmasked tiles)
};

// Contiguous (kStrided false): split s reads the s-th of num_splits equal runs of tiles. Strided:
// split s reads tiles first + s, first + s + num_splits, ... — the same number of tiles, but the
// first one does not depend on the sequence's length, so a CTA can issue its first loads before
// cache_seqlens arrives (decode_mma_kernel.h, kEarlyLoads; docs/kvcache.md, v7).
template <int kBlockN, bool kStrided = false>
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
  w.tile_step = kStrided ? num_splits : 1;
  if (hi > lo) {
    const int first = lo / kBlockN;
    const long long tiles = (hi - first * kBlockN + kBlockN - 1) / kBlockN;
    if constexpr (kStrided) {
      w.tile_begin = first + split;
      w.tile_end = first + static_cast<int>(tiles);
    } else {
      w.tile_begin = first + static_cast<int>(tiles * split / num_splits);
      w.tile_end = first + static_cast<int>(tiles * (split + 1) / num_splits);
    }
  }
  return w;
}

// What a strided split's first tiles are read as before cache_seqlens arrives: a sequence that
// fills the cache (keys up to the capacity), no left padding, cache row b. Only where that cannot
// change which tiles the split reads or where they are: no left padding, no window on the left
// (the first tile is then 0), no cache_batch_idx (a contiguous cache's row would be one more read).
// Keys the real schedule does not see are zeroed after they land (the kernel's job).
__device__ __forceinline__ bool early_loads_allowed(const DecodeParams& p) {
  return p.cache_leftpad == nullptr && p.window_left < 0 && (p.block_table != nullptr || p.cache_batch_idx == nullptr);
}
__device__ __forceinline__ DecodeWork speculative_work(const DecodeParams& p, int b) {
  DecodeWork w{};
  w.seqlen_k = p.capacity;
  w.leftpad = 0;
  w.cache_row = b;
  return w;
}

// Element offsets of key j (relative to the sequence's leftpad) in k_cache and v_cache, through
// the block table for a paged cache. False (offsets unset) for a key past the sequence or the
// capacity, or an invalid page id or cache row: the caller zero-fills instead of reading.
__device__ __forceinline__ bool kv_offsets(const DecodeParams& p, const DecodeWork& w, int b, int j,
                                           std::int64_t* k_off, std::int64_t* v_off) {
  const int pos = w.leftpad + j;
  if (j >= w.seqlen_k || pos >= p.capacity) return false;
  if (p.block_table != nullptr) {
    const int page = p.block_table[b * p.block_table_stride + pos / p.page_size];
    if (page < 0 || page >= p.num_pages) return false;  // guards even when the host skipped its check
    const int slot = pos % p.page_size;
    *k_off = page * p.k_cache_strides.batch + slot * p.k_cache_strides.row;
    *v_off = page * p.v_cache_strides.batch + slot * p.v_cache_strides.row;
    return true;
  }
  if (w.cache_row < 0 || w.cache_row >= p.batch_cache) return false;
  *k_off = w.cache_row * p.k_cache_strides.batch + static_cast<std::int64_t>(pos) * p.k_cache_strides.row;
  *v_off = w.cache_row * p.v_cache_strides.batch + static_cast<std::int64_t>(pos) * p.v_cache_strides.row;
  return true;
}

// Score of raw q·k `qk` (q not scaled) for query position i and key j, in log2 units for exp2:
// scale, softcap and ALiBi as flashcore/attention.h defines them, -inf when masked (checked only
// where `needs_mask`: tiles every row sees whole skip it).
struct ScoreRule {
  float scale_log2;   // softmax_scale * log2(e): the whole rule without score options
  float scale;        // softmax_scale
  float inv_softcap;  // 1 / softcap, 0: off
  float softcap;
  int shift;          // seqlen_k - seqlen_q: row i's diagonal is key i + shift
  int seqlen_k, window_left, right;  // right: 0 when causal, else window_right (-1: unbounded)
  bool score_mod;

  __device__ __forceinline__ float operator()(float qk, int i, int j, float slope, bool needs_mask) const {
    constexpr float kLog2e = 1.4426950408889634f;
    float x;
    if (score_mod) {
      x = qk * scale;
      if (inv_softcap > 0.0f) x = softcap * tanhf(x * inv_softcap);
      x = (x - slope * static_cast<float>(abs(i + shift - j))) * kLog2e;
    } else {
      x = qk * scale_log2;
    }
    if (needs_mask) {
      const bool visible =
          j < seqlen_k && (window_left < 0 || j >= i + shift - window_left) && (right < 0 || j <= i + shift + right);
      if (!visible) x = -INFINITY;
    }
    return x;
  }
};

__device__ __forceinline__ ScoreRule score_rule(const DecodeParams& p, const DecodeWork& w) {
  ScoreRule r;
  r.scale_log2 = p.scale_log2;
  r.scale = p.softmax_scale;
  r.softcap = p.softcap;
  r.inv_softcap = p.softcap > 0.0f ? __frcp_rn(p.softcap) : 0.0f;
  r.shift = w.seqlen_k - p.seqlen_q;
  r.seqlen_k = w.seqlen_k;
  r.window_left = p.window_left;
  r.right = p.causal ? 0 : p.window_right;
  r.score_mod = p.softcap > 0.0f || p.alibi_slopes != nullptr;
  return r;
}

// Columns [col, col + 8) of packed query row r (query head hk * group_size + r / seqlen_q, position
// r % seqlen_q) of sequence b, rotated when the call has rotary and rounded to the dtype (the
// precision the cache holds keys in); zeros past the rows or head_dim.
template <typename Element>
__device__ __forceinline__ void load_q8(const DecodeParams& p, int b, int hk, int r, int col, int cache_len,
                                        float (&out)[8]) {
#pragma unroll
  for (int e = 0; e < 8; ++e) out[e] = 0.0f;
  if (r >= p.group_size * p.seqlen_q || col >= p.head_dim) return;
  const int h = hk * p.group_size + r / p.seqlen_q;
  const int i = r % p.seqlen_q;
  const Element* q_row =
      static_cast<const Element*>(p.q) + b * p.q_strides.batch + i * p.q_strides.row + h * p.q_strides.head;
  const int pos = cache_len + (p.rotate_q_per_row ? i : 0);
  const bool rotate = p.rotary_dim > 0 && pos < p.rotary_seqlen;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    out[e] = static_cast<float>(q_row[col + e]);
    if (rotate) {
      const float x = rotated_element(q_row, col + e, static_cast<const Element*>(p.rotary_cos) + pos * p.rotary_cos_stride,
                                      static_cast<const Element*>(p.rotary_sin) + pos * p.rotary_sin_stride, p.rotary_dim,
                                      p.rotary_interleaved);
      out[e] = static_cast<float>(static_cast<Element>(x));
    }
  }
}

}  // namespace decode

}  // namespace flashcore::cuda::sm80
