// Which (query, key) pairs a key block of the backward pass must visit and mask. Seen from a
// key block (the backward's outer loop) instead of a query block (the forward's):
//   causal, bottom-right aligned: query i sees key j iff j <= i + seqlen_k - seqlen_q, so key
//   block [n0, n0 + kBlockN) is seen by queries i >= n0 - (seqlen_k - seqlen_q) only.
// Masked probabilities are set to exactly 0 (not -inf scores): P then contributes nothing to
// dV, and dS = P * (dP - D) is 0 too, whatever the softmax scale's sign.
#pragma once

namespace flashcore::cuda::sm80 {

struct BwdMask {
  int seqlen_q;
  int seqlen_k;
  bool causal;

  __forceinline__ __device__ int diagonal() const { return seqlen_k - seqlen_q; }

  // First query block that sees any key of the key block starting at n0.
  __forceinline__ __device__ int m_block_min(int n0, int block_m) const {
    return causal ? max(n0 - diagonal(), 0) / block_m : 0;
  }

  // Whether tile (m0, n0) holds any pair that must be masked: keys past seqlen_k, or (causal)
  // keys after the diagonal of the tile's first row. Query rows past seqlen_q need no mask:
  // their lse_log2 is +inf, so their P is already 0.
  __forceinline__ __device__ bool tile_needs_mask(int m0, int n0, int block_n) const {
    return n0 + block_n > seqlen_k || (causal && m0 + diagonal() < n0 + block_n - 1);
  }

  __forceinline__ __device__ bool visible(int row, int col) const {
    return col < seqlen_k && (!causal || col <= row + diagonal());
  }
};

}  // namespace flashcore::cuda::sm80
