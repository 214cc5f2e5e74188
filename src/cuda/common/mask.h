// Which (query, key) pairs attention may use: keys past seqlen_k never, and when causal, keys after
// the query's diagonal (bottom-right aligned: key j is visible to query i iff
// j <= i + seqlen_k - seqlen_q). One rule for every kernel family and both passes.
//
// Trip counts let mainloops run the few tiles that need a mask separately from the many that do
// not: the forward walks the key blocks of a query block (n_block_end, n_block_unmasked), the
// backward the query blocks of a key block (m_block_min, tile_needs_mask). The forward masks
// scores to -inf (exp gives exactly 0); the backward sets masked probabilities to exactly 0, so P
// adds nothing to dV and dS = P (dP - D) is 0 too, whatever the softmax scale's sign.
#pragma once

#include <cmath>

#include <cute/tensor.hpp>

namespace flashcore::cuda {

struct AttentionMask {
  int seqlen_q;
  int seqlen_k;
  bool causal;

  // Key blocks [0, n_block_end) hold every key some row of query block m_block may see.
  __forceinline__ __host__ __device__ int n_block_end(int m_block, int block_m, int block_n) const {
    int keys = seqlen_k;
    if (causal) {
      const int last_visible = (m_block + 1) * block_m - 1 + seqlen_k - seqlen_q;  // of the block's last row
      keys = min(keys, max(last_visible + 1, 0));
    }
    return (keys + block_n - 1) / block_n;
  }

  // Key blocks [0, n_block_unmasked) need no mask for any row of query block m_block: all their
  // keys exist and all are visible to the block's first row.
  __forceinline__ __host__ __device__ int n_block_unmasked(int m_block, int block_m, int block_n) const {
    int full_keys = seqlen_k;
    if (causal) {
      const int first_row_visible = m_block * block_m + seqlen_k - seqlen_q + 1;  // keys seen by the first row
      full_keys = min(full_keys, max(first_row_visible, 0));
    }
    return full_keys / block_n;
  }

  __forceinline__ __host__ __device__ int diagonal() const { return seqlen_k - seqlen_q; }

  // First query block that sees any key of the key block starting at n0 (key block [n0, n0 +
  // block_n) is seen by queries i >= n0 - diagonal() only).
  __forceinline__ __host__ __device__ int m_block_min(int n0, int block_m) const {
    return causal ? max(n0 - diagonal(), 0) / block_m : 0;
  }

  // Whether tile (m0, n0) holds any pair that must be masked: keys past seqlen_k, or (causal)
  // keys after the diagonal of the tile's first row. Query rows past seqlen_q need no mask in the
  // backward: their lse_log2 is +inf, so their P is already 0.
  __forceinline__ __host__ __device__ bool tile_needs_mask(int m0, int n0, int block_n) const {
    return n0 + block_n > seqlen_k || (causal && m0 + diagonal() < n0 + block_n - 1);
  }

  __forceinline__ __host__ __device__ bool visible(int row, int col) const {
    return col < seqlen_k && (!causal || col <= row + diagonal());
  }

  // Set the masked entries of an accumulator tile to -inf. `coords` is the identity tensor of the
  // tile partitioned like the accumulator; (row0, col0) is the tile's corner in the full matrix.
  template <class TensorAcc, class TensorCoord>
  __forceinline__ __device__ void apply(TensorAcc& acc, TensorCoord const& coords, int row0, int col0) const {
    const int diagonal = seqlen_k - seqlen_q;
    CUTE_UNROLL
    for (int i = 0; i < cute::size(acc); ++i) {
      const int row = row0 + cute::get<0>(coords(i));
      const int col = col0 + cute::get<1>(coords(i));
      if (col >= seqlen_k || (causal && col > row + diagonal)) acc(i) = -INFINITY;
    }
  }
};

}  // namespace flashcore::cuda
