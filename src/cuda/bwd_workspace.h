// The backward's scratch memory: one allocation (the caller's, or the stream-ordered allocator's)
// carved into the buffers BwdParams names. Each family plans it with its own padding and split
// count (its bwd_launch.h); backward.cu sizes, checks and carves it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/params.h"

namespace flashcore::cuda {

// The backward's scratch buffers (cuda/params.h, BwdParams) as byte offsets into one allocation,
// each 256-byte aligned. A family fills it with its own padding and split count.
struct BwdWorkspace {
  int seqlen_q_rounded = 0;
  int num_splits = 1;
  std::int64_t dq_accum_split_elems = 0;
  std::size_t lse_log2_offset = 0;
  std::size_t dsum_offset = 0;
  std::size_t dq_accum_offset = 0;
  std::size_t varlen_work_offset = 0;
  int varlen_work_entries = 0;  // pairs of ints (params.h, BwdParams::varlen_work); 0: none
  std::size_t total_bytes = 0;

  // The plan for seqlen_q padded to a multiple of `seqlen_q_rounding`, dQ rows of
  // `head_dim_rounded` floats and `num_splits` dq_accum slices.
  static BwdWorkspace plan(const ProblemParams& p, int seqlen_q_rounding, int head_dim_rounded, int num_splits);
  // Appends the varlen work list of `entries` pairs of ints.
  void add_varlen_work(int entries);
  // Points params' workspace fields into `base`.
  void carve(void* base, BwdParams* params) const;
};

}  // namespace flashcore::cuda
