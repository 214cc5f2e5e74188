// Which (query, key) pairs attention may use: keys past seqlen_k never; when causal, keys after
// the query's diagonal; with a sliding window, keys more than window_right after it or more than
// window_left before it (attention.h; -1 = unbounded). Bottom-right aligned: with
//   offset(i, j) = j - (i + seqlen_k - seqlen_q)
// key j is visible to query i iff offset <= right (right = 0 when causal) and offset >= -left.
// One rule for every kernel family and both passes.
//
// Trip counts let mainloops skip the tiles wholly outside the window and run the few tiles that
// need a mask separately from the many that do not: the forward walks the key blocks of a query
// block ([n_block_begin, n_block_end), unmasked in [n_block_unmasked_begin, n_block_unmasked)),
// the backward the query blocks of a key block ([m_block_min, m_block_max), tile_needs_mask). The
// forward masks scores to -inf (exp gives exactly 0); the backward sets masked probabilities to
// exactly 0, so P adds nothing to dV and dS = P (dP - D) is 0 too, whatever the softmax scale's sign.
//
// The window is runtime data, not a template parameter: it changes only which tiles run and the
// masked tiles' compares, so the plain kernels serve it and no instantiation is added for it.
#pragma once

#include <climits>
#include <cmath>

#include <cute/tensor.hpp>

namespace flashcore::cuda {

// min and max for host and device alike (the host half is unit-tested by a host compiler).
__forceinline__ __host__ __device__ int mask_min(int a, int b) { return a < b ? a : b; }
__forceinline__ __host__ __device__ int mask_max(int a, int b) { return a > b ? a : b; }

struct AttentionMask {
  int seqlen_q;
  int seqlen_k;
  bool causal;
  int window_left = -1;   // -1: unbounded
  int window_right = -1;  // -1: unbounded; taken as 0 when causal

  __forceinline__ __host__ __device__ int diagonal() const { return seqlen_k - seqlen_q; }
  // The largest visible offset (INT_MAX: none) and the smallest (INT_MIN / 2: none); offsets stay
  // within (-seqlen_k - block, seqlen_q + block), so neither bound overflows a comparison.
  __forceinline__ __host__ __device__ int max_offset() const {
    return causal ? 0 : (window_right < 0 ? INT_MAX : window_right);
  }
  __forceinline__ __host__ __device__ int min_offset() const { return window_left < 0 ? INT_MIN / 2 : -window_left; }
  __forceinline__ __host__ __device__ bool has_right() const { return causal || window_right >= 0; }
  __forceinline__ __host__ __device__ bool has_left() const { return window_left >= 0; }

  // ---- forward: key blocks of query block m_block ----

  // Key blocks [n_block_begin, n_block_end) hold every key some row of query block m_block may see.
  __forceinline__ __host__ __device__ int n_block_end(int m_block, int block_m, int block_n) const {
    int keys = seqlen_k;
    if (has_right()) {
      const int last_visible = (m_block + 1) * block_m - 1 + diagonal() + max_offset();  // of the block's last row
      keys = mask_min(keys, mask_max(last_visible + 1, 0));
    }
    return (keys + block_n - 1) / block_n;
  }
  __forceinline__ __host__ __device__ int n_block_begin(int m_block, int block_m, int block_n) const {
    if (!has_left()) return 0;
    const int first_visible = m_block * block_m + diagonal() - window_left;  // of the block's first row
    return mask_min(mask_max(first_visible, 0), seqlen_k) / block_n;
  }

  // Key blocks below n_block_unmasked need no right-side mask for any row of query block m_block:
  // all their keys exist and all are visible to the block's first row.
  __forceinline__ __host__ __device__ int n_block_unmasked(int m_block, int block_m, int block_n) const {
    int full_keys = seqlen_k;
    if (has_right()) {
      const int first_row_visible = m_block * block_m + diagonal() + max_offset() + 1;  // keys seen by the first row
      full_keys = mask_min(full_keys, mask_max(first_row_visible, 0));
    }
    return full_keys / block_n;
  }
  // Key blocks from n_block_unmasked_begin on need no left-side mask: the block's last row sees
  // all of their keys (a block may be past n_block_unmasked and still need the right-side mask).
  __forceinline__ __host__ __device__ int n_block_unmasked_begin(int m_block, int block_m, int block_n) const {
    if (!has_left()) return 0;
    const int last_row_first = (m_block + 1) * block_m - 1 + diagonal() - window_left;
    return (mask_min(mask_max(last_row_first, 0), seqlen_k) + block_n - 1) / block_n;
  }

  // ---- backward: query blocks of the key block starting at n0 ----

  // First query block that sees any key of the key block starting at n0 (key block [n0, n0 +
  // block_n) is seen by queries i >= n0 - diagonal() - right only).
  __forceinline__ __host__ __device__ int m_block_min(int n0, int block_m) const {
    return has_right() ? mask_max(n0 - diagonal() - max_offset(), 0) / block_m : 0;
  }
  // One past the last query block that sees any key of the key block [n0, n0 + block_n): its last
  // key is seen by queries i <= n0 + block_n - 1 - diagonal() + left only. m_blocks: all of them.
  __forceinline__ __host__ __device__ int m_block_max(int n0, int block_n, int block_m, int m_blocks) const {
    if (!has_left()) return m_blocks;
    const int last_row = mask_min(n0 + block_n, seqlen_k) - 1 - diagonal() + window_left;
    return last_row < 0 ? 0 : mask_min(m_blocks, last_row / block_m + 1);
  }

  // Whether tile (m0, n0) holds any pair that must be masked: keys past seqlen_k, keys right of
  // the window of the tile's first row, or keys left of the window of its last row. Query rows past
  // seqlen_q need no mask in the backward: their lse_log2 is +inf, so their P is already 0.
  __forceinline__ __host__ __device__ bool tile_needs_mask(int m0, int n0, int block_m, int block_n) const {
    return n0 + block_n > seqlen_k || (has_right() && n0 + block_n - 1 - (m0 + diagonal()) > max_offset()) ||
           (has_left() && n0 - (m0 + block_m - 1 + diagonal()) < min_offset());
  }
  // Without a left window bound (what a family that declares no window support sees).
  __forceinline__ __host__ __device__ bool tile_needs_mask(int m0, int n0, int block_n) const {
    return n0 + block_n > seqlen_k || (causal && m0 + diagonal() < n0 + block_n - 1);
  }

  // Whether query `row` sees any key at all (its output is then the formula's, else 0 with LSE
  // -inf). Decides between "no key" and "every visible score is -inf" (0/0, NaN) at the epilogue.
  __forceinline__ __host__ __device__ bool row_sees_a_key(int row) const {
    const int first = mask_max(row + diagonal() + min_offset(), 0);
    return first < seqlen_k && (!has_right() || row + diagonal() + max_offset() >= first);
  }
  __forceinline__ __host__ __device__ bool visible(int row, int col) const {
    const int offset = col - row - diagonal();
    return col < seqlen_k && offset <= max_offset() && (!has_left() || offset >= min_offset());
  }

  // Set the masked entries of an accumulator tile to -inf. `coords` is the identity tensor of the
  // tile partitioned like the accumulator; (row0, col0) is the tile's corner in the full matrix.
  template <class TensorAcc, class TensorCoord>
  __forceinline__ __device__ void apply(TensorAcc& acc, TensorCoord const& coords, int row0, int col0) const {
    const int hi = max_offset();
    const int lo = min_offset();
    const int shift = col0 - row0 - diagonal();
    CUTE_UNROLL
    for (int i = 0; i < cute::size(acc); ++i) {
      const int row = cute::get<0>(coords(i));
      const int col = cute::get<1>(coords(i));
      const int offset = col - row + shift;
      // has_left() is a constant in kernels built without a window: the compare folds away.
      if (col0 + col >= seqlen_k || offset > hi || (has_left() && offset < lo)) acc(i) = -INFINITY;
    }
  }
};

}  // namespace flashcore::cuda
