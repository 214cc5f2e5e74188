// Which (m_block, head, batch) tiles a CTA works on.
//
// Non-causal: persistent. The grid has min(#tiles, #SMs) CTAs and CTA i takes tiles i,
// i + gridDim.x, ...; m_block varies fastest so the CTAs running together share a head's K/V
// in L2. Every tile costs the same, so the static stride balances.
// Causal: one tile per CTA, the hardware block scheduler balancing the unequal tiles; within a
// head the m_blocks run longest-first (reversed), so the short tiles fill the tail of the wave.
#pragma once

namespace flashcore::cuda::sm90 {

struct FwdTile {
  int m_block;
  int head;
  int batch;
};

template <bool kPersistent>
struct FwdTileScheduler {
  int num_m_blocks;
  int heads;
  int batch;

  __host__ __device__ int num_tiles() const { return num_m_blocks * heads * batch; }

  __host__ static int grid_size(int num_tiles, int sm_count) {
    return kPersistent ? (num_tiles < sm_count ? num_tiles : sm_count) : num_tiles;
  }

  __device__ int first_tile() const { return int(blockIdx.x); }
  __device__ int next_tile(int tile) const { return kPersistent ? tile + int(gridDim.x) : num_tiles(); }
  __device__ bool valid(int tile) const { return tile < num_tiles(); }

  __device__ FwdTile decode(int tile) const {
    const int m = tile % num_m_blocks;
    const int head_batch = tile / num_m_blocks;
    return {kPersistent ? m : num_m_blocks - 1 - m, head_batch % heads, head_batch / heads};
  }
};

}  // namespace flashcore::cuda::sm90
