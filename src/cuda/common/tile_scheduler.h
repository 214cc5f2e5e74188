// Which tile a CTA works on. A tile is (block, head, batch): a block of query rows in the forward,
// of key rows in the backward, of one head of one batch entry.
//
// SingleTileScheduler: one CTA per tile, the grid (blocks, heads, batch) covering them all. Only
// the block order is a choice: with a causal mask the last query blocks see the most keys, and
// launching them first shortens the tail of the grid. Persistent schedulers (a grid of one CTA
// per SM looping over tiles) belong to the families that use them.
#pragma once

#include <cuda_runtime.h>

namespace flashcore::cuda {

struct TileCoord {
  int block;
  int head;
  int batch;
};

template <bool kLongestFirst>
struct SingleTileScheduler {
  static dim3 grid(int blocks, int heads, int batch) { return dim3(blocks, heads, batch); }

  __forceinline__ __device__ static TileCoord tile() {
    const int block = kLongestFirst ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : static_cast<int>(blockIdx.x);
    return {block, static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z)};
  }
};

}  // namespace flashcore::cuda
