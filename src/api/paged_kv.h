// forward() with paged keys and values (attention.h, "paged": flash_attn_varlen_func's
// block_table). The varlen kernels and CPU backends read packed (total_k, heads_kv, head_dim) keys,
// so a paged call gathers the pages it uses into packed copies, one row per key in cu_seqlens_k's
// order, and runs the plain varlen forward on them: one extra pass over the keys the call reads,
// against the forward's own passes (one per block of queries); docs/flash_attn_compat.md says why
// this and not a paged mainloop.
#pragma once

#include <cstdint>

#include "flashcore/attention.h"

namespace flashcore::detail {

// The pages' layout, checked by forward_paged.
struct PagedKv {
  std::int64_t batch = 0;      // block_table.shape[0] = cu_seqlens_k.shape[0] - 1
  std::int64_t num_pages = 0;  // k.shape[0]
  std::int64_t page_size = 0;  // k.shape[1]
  std::int64_t max_pages = 0;  // block_table.shape[1]
  std::int64_t heads_kv = 0;   // k.shape[2]
  std::int64_t head_dim = 0;   // k.shape[3]
};

// forward() for params with block_table: checks what only a paged call has (the pages' shapes,
// block_table, cu_seqlens_k, and on the host the offsets and the page ids each sequence uses), then
// gathers on the backend the tensors live on and runs gathered_call. The messages name the argument.
Status forward_paged(const ForwardParams& params);

// params with k and v replaced by packed (rows, heads_kv, head_dim) copies and block_table dropped:
// the call forward_paged runs (and validates) after gathering.
ForwardParams gathered_call(const ForwardParams& params, const TensorView& k, const TensorView& v);

}  // namespace flashcore::detail
