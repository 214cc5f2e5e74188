// A decode launch's grid before and after the key split, shared by the sm80 launcher (global merge)
// and sm90's cluster launcher: CTAs without a split (batch x kv heads x blocks of packed query
// rows), key tiles a sequence, and the split count (the caller's, or common/decode_splits.h's
// heuristic at the kernel's occupancy), capped by the tiles and by what the kernel's merge holds.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/common/cuda_check.h"
#include "cuda/common/decode_splits.h"
#include "cuda/params.h"

namespace flashcore::cuda {

struct DecodeGrid {
  int m_blocks = 1;         // blocks of kRows packed query rows (the GQA group x seqlen_q) a kv head
  long long base_ctas = 1;  // batch x heads_kv x m_blocks: the grid of one split
  long long tiles = 1;      // key tiles of the longest sequence
  int num_splits = 1;
};

template <class Traits, class Kernel>
Status decode_grid(const DecodeParams& params, Kernel kernel, int max_splits, DecodeGrid* grid) {
  const int rows = params.group_size * params.seqlen_q;
  grid->m_blocks = (rows + Traits::kRows - 1) / Traits::kRows;
  grid->base_ctas = static_cast<long long>(params.batch) * params.heads_kv * grid->m_blocks;
  grid->tiles = (std::max(params.max_seqlen_k, 1) + Traits::kBlockN - 1) / Traits::kBlockN;
  int num_splits = params.num_splits;
  if (num_splits == 0) {
    int per_sm = 1;
    FLASHCORE_CUDA_RETURN_IF_ERROR(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Traits::kThreads, Traits::kSmemBytes));
    num_splits = choose_decode_splits(grid->base_ctas, grid->tiles, params.device.sm_count, per_sm, max_splits);
  }
  // A forced count is capped too: by the tiles (an empty split only adds work) and max_splits.
  grid->num_splits =
      static_cast<int>(std::clamp<long long>(num_splits, 1, std::min<long long>(grid->tiles, max_splits)));
  return Status::Ok();
}

}  // namespace flashcore::cuda
