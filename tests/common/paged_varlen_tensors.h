// Paged varlen test tensors (attention.h, "paged"), shared by the CPU and GPU suites: q, pages of k
// and v in a padded pool, a shuffled block table with spare columns and unused pages, and the packed
// keys the pages hold, built here position by position (not by the library's gather), so a paged
// call can be compared with the same call on the packed keys.
#pragma once

#include <cstdint>
#include <vector>

#include "common/host_tensor.h"
#include "flashcore/attention.h"

namespace flashcore::testing {

struct PagedCase {
  std::vector<std::int32_t> lengths_q;
  std::vector<std::int32_t> lengths_k;
  std::int64_t page_size;
  std::int64_t head_dim;
  bool causal;
  std::int64_t window_left;
};

// The cases both suites run: an empty sequence, page sizes 7, 16 and 256, decoding (one query per
// sequence), causal with more queries than keys, a window, head dims 32, 40 (not a multiple of 8), 64.
std::vector<PagedCase> paged_cases();

struct PagedTensors {
  static constexpr std::int64_t kHeadsQ = 4, kHeadsKv = 2;
  PagedCase c;
  std::int64_t batch, max_pages, num_pages, max_q, max_k;
  std::vector<std::int32_t> cu_q, cu_k, table;
  HostTensor q, k_pages, v_pages, k_packed, v_packed, out_paged, out_packed, lse_paged, lse_packed;

  PagedTensors(const PagedCase& paged, DType dtype);

  // The call over host memory: paged (pages + block_table) or on the packed keys, writing the
  // matching out / lse.
  ForwardParams params(Backend backend, bool paged);
};

}  // namespace flashcore::testing
