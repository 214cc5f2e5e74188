// The validated description of one forward_kvcache call (flashcore/kvcache.h), shared by every
// backend, and the host copies of its index tensors.
#pragma once

#include <cstdint>
#include <vector>

#include "api/problem.h"
#include "flashcore/kvcache.h"

namespace flashcore::detail {

struct KvCacheProblem {
  // Sizes, dtype, device, backend and score options as the plain forward has them. seqlen_k is the
  // cache's capacity per sequence (the window was normalised against it: a bound past the capacity
  // excludes no key of any sequence).
  AttentionProblem attn;
  bool paged = false;
  std::int64_t batch_cache = 0;   // contiguous: k_cache.shape[0]
  std::int64_t seqlen_cache = 0;  // contiguous: k_cache.shape[1]
  std::int64_t num_pages = 0;     // paged: k_cache.shape[0]
  std::int64_t page_size = 0;     // paged: k_cache.shape[1]
  std::int64_t max_pages = 0;     // paged: block_table.shape[1]
  std::int64_t capacity = 0;      // positions a sequence can hold: seqlen_cache or max_pages * page_size
  std::int64_t seqlen_new = 0;    // 0 without k_new
  std::int64_t rotary_dim = 0;    // 0 without rotary
  std::int64_t seqlen_ro = 0;
  bool rotary_interleaved = true;
  // flash_attn rotates q row i at position cache_seqlens + i when the call is causal or local, else
  // every row at cache_seqlens.
  bool rotate_q_per_row = false;
  int num_splits = 0;

  bool has_new() const { return seqlen_new > 0; }
};

// The int32 index tensors as host arrays, absent ones filled with their defaults.
struct KvCacheIndices {
  std::vector<std::int32_t> cache_seqlens;    // (batch); default capacity
  std::vector<std::int32_t> cache_batch_idx;  // (batch); default b
  std::vector<std::int32_t> cache_leftpad;    // (batch); default 0
  std::vector<std::int32_t> block_table;      // (batch, max_pages) row-major; empty when not paged

  // Sequence b's attention keys are the cache positions [leftpad, end).
  std::int64_t end(const KvCacheProblem& p, std::int64_t b) const { return cache_seqlens[b] + p.seqlen_new; }
  std::int64_t seqlen_k(const KvCacheProblem& p, std::int64_t b) const { return end(p, b) - cache_leftpad[b]; }
};

// Shapes, dtypes, strides and options; the index tensors' values are checked by check_kvcache_indices.
Status validate_kvcache(const KvCacheParams& params, KvCacheProblem* problem);

// Reads the index tensors of a call on CPU tensors into `indices` (defaults for absent ones).
void read_host_indices(const KvCacheParams& params, const KvCacheProblem& p, KvCacheIndices* indices);
// Fills the defaults of absent index tensors (the CUDA backend copies the present ones itself).
void fill_default_indices(const KvCacheParams& params, const KvCacheProblem& p, KvCacheIndices* indices);

// Every index in range: lengths within the cache, leftpad <= cache_seqlens, the pages a sequence
// uses in [0, num_pages), cache_batch_idx in [0, batch_cache) and distinct when appending, the
// rotary table long enough. The message names the argument and the sequence.
Status check_kvcache_indices(const KvCacheProblem& p, const KvCacheIndices& indices);

}  // namespace flashcore::detail
