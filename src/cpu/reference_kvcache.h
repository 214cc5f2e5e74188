// The float64 reference of forward_kvcache (flashcore/kvcache.h): for each sequence it assembles
// the keys after the append in float64 (old positions read from the cache, new ones from k_new /
// v_new with the rotary embedding applied in float64, never rounded), rotates q in float64, and runs
// reference.h's attention over them. It shares no indexing, rotary or softmax code with the fast
// paths. Tensors are read through host views (a GPU test passes host copies).
#pragma once

#include <vector>

#include "api/kvcache_problem.h"

namespace flashcore::cpu {

// One sequence's attention inputs in float64: q rotated (seqlen_q, heads_q, head_dim), k and v
// (seqlen_k, heads_kv, head_dim) after the append.
struct KvSequenceF64 {
  std::int64_t seqlen_k = 0;
  std::vector<double> q, k, v;
};

// out (batch, seqlen_q, heads_q, head_dim), lse (batch, heads_q, seqlen_q) and k_appended (batch,
// seqlen_new, heads_kv, head_dim): the new keys as rotated in float64 (k_new itself without rotary).
// `sequences` (optional) receives each sequence's inputs, e.g. for the tests' same-precision baseline.
Status reference_kvcache_f64(const KvCacheParams& params, const detail::KvCacheProblem& problem,
                             const detail::KvCacheIndices& indices, std::vector<double>* out,
                             std::vector<double>* lse, std::vector<double>* k_appended,
                             std::vector<KvSequenceF64>* sequences = nullptr);

// Position `pos` of sequence b in a cache view: (cache row or page, slot) as kvcache.h defines it.
struct CacheSlot {
  std::int64_t row;
  std::int64_t slot;
};
CacheSlot cache_slot(const detail::KvCacheProblem& p, const detail::KvCacheIndices& x, std::int64_t b,
                     std::int64_t pos);

}  // namespace flashcore::cpu
