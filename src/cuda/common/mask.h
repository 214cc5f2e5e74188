// Which scores a query row may see, applied to an accumulator tile: keys past seqlen_k and, when
// causal, keys after the query's diagonal (bottom-right aligned: key j is visible to query i iff
// j <= i + seqlen_k - seqlen_q). Masked scores become -inf so exp() gives exactly 0.
//
// The trip-count helpers let the mainloop run the few tiles that need a mask separately from the
// many that do not.
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
