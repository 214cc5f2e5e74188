// Which (m_block, head, batch) tiles a CTA works on.
//
// Persistent: the grid has min(#tiles, #SMs) CTAs and CTA i takes tiles i, i + gridDim.x, ...
// Otherwise one tile per CTA, the hardware block scheduler balancing.
// Order, non-causal: m_block fastest, so the CTAs running together share a head's K/V in L2.
// Order, causal (tiles of unequal cost): longest first. One tile per CTA: m_blocks reversed
// within each head, the short tiles of a head filling in behind the long ones. Persistent: the
// whole list sorted by cost (m_block reversed, slowest), so the static stride hands every CTA
// nearly the same sequence of costs.
#pragma once

namespace flashcore::cuda::sm90 {

struct FwdTile {
  int m_block;
  int head;
  int batch;
};

template <bool kPersistent, bool kCausalOrder>
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
    int m, head_batch;
    if constexpr (kCausalOrder && kPersistent) {
      head_batch = tile % (heads * batch);
      m = num_m_blocks - 1 - tile / (heads * batch);
    } else {
      m = tile % num_m_blocks;
      head_batch = tile / num_m_blocks;
      if constexpr (kCausalOrder) m = num_m_blocks - 1 - m;
    }
    return {m, head_batch % heads, head_batch / heads};
  }
};

}  // namespace flashcore::cuda::sm90
