// forward_kvcache test problems, shared by the CPU and GPU suites: host tensors for one case (a
// contiguous or paged cache with random contents, random lengths, left padding, cache_batch_idx,
// rotary tables, score options), and the check of a run's results against the float64 reference
// (out and LSE under FlashAttention's rule; the cache: new rows written, nothing else touched).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/host_tensor.h"
#include "flashcore/kvcache.h"

namespace flashcore::testing {

struct KvCacheCase {
  const char* name;
  std::int64_t batch = 1;
  std::int64_t seqlen_q = 1;
  std::int64_t heads_q = 1;
  std::int64_t heads_kv = 1;
  std::int64_t head_dim = 64;
  std::int64_t capacity = 64;    // positions per sequence: seqlen_cache, or pages per sequence * page_size
  std::int64_t page_size = 0;    // 0: contiguous cache
  std::int64_t seqlen_new = 0;   // 0: no k_new / v_new
  int rotary = 0;                // 0: none, 1: interleaved, 2: halves (GPT-NeoX)
  std::int64_t rotary_dim = 0;   // default head_dim
  bool causal = false;
  std::int64_t window_left = -1;
  std::int64_t window_right = -1;
  float softcap = 0.0f;
  int alibi = 0;                 // 0: none, 1: (heads_q), 2: (batch, heads_q)
  bool leftpad = false;
  bool batch_idx = false;        // contiguous only: sequences use shuffled rows of a larger cache
  bool full = false;             // no cache_seqlens: every sequence fills its cache (no k_new)
  int num_splits = 0;
};

std::string kvcache_case_name(const KvCacheCase& c);
// gtest prints a case by its name (not its bytes).
inline void PrintTo(const KvCacheCase& c, std::ostream* os) { *os << c.name; }

struct KvCacheTensors {
  KvCacheTensors(const KvCacheCase& c, DType dtype, std::uint64_t seed);

  // Params over the host tensors (every view on the CPU).
  KvCacheParams host_params(Backend backend) const;

  KvCacheCase c;
  DType dtype;
  HostTensor q, k_cache, v_cache, k_new, v_new, rotary_cos, rotary_sin, out, lse;
  std::vector<std::int32_t> cache_seqlens, cache_batch_idx, cache_leftpad, block_table;
  std::vector<float> alibi_slopes;
  std::int64_t max_pages = 0;
  // The caches as they were before any run, for the reference and the untouched-elsewhere check.
  HostTensor k_cache_before, v_cache_before;
};

// Judges out, lse, k_cache and v_cache of `t` (holding a run's results) against the reference
// computed from the inputs. Returns "" when everything passes, else what failed.
std::string check_kvcache_results(const KvCacheTensors& t);

std::vector<KvCacheCase> kvcache_cases();  // the sweep both suites run

}  // namespace flashcore::testing
