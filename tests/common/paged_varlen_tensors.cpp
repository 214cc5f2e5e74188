// See paged_varlen_tensors.h.
#include "common/paged_varlen_tensors.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace flashcore::testing {
namespace {

std::vector<std::int32_t> offsets(const std::vector<std::int32_t>& lengths) {
  std::vector<std::int32_t> cu(lengths.size() + 1, 0);
  std::partial_sum(lengths.begin(), lengths.end(), cu.begin() + 1);
  return cu;
}

}  // namespace

std::vector<PagedCase> paged_cases() {
  return {
      {{5, 3, 64}, {37, 0, 70}, 16, 40, false, -1},
      {{1, 1, 1, 1}, {9, 50, 1, 23}, 7, 64, true, 8},
      {{30, 12}, {20, 33}, 256, 32, true, -1},
  };
}

PagedTensors::PagedTensors(const PagedCase& paged, DType dtype)
    : c(paged),
      batch(static_cast<std::int64_t>(paged.lengths_q.size())),
      max_q(*std::max_element(paged.lengths_q.begin(), paged.lengths_q.end())),
      max_k(*std::max_element(paged.lengths_k.begin(), paged.lengths_k.end())),
      cu_q(offsets(paged.lengths_q)),
      cu_k(offsets(paged.lengths_k)) {
  max_pages = (max_k + c.page_size - 1) / c.page_size + 1;  // one spare column
  num_pages = batch * max_pages + 3;                        // pages no sequence uses too
  const std::int64_t total_q = cu_q.back(), total_k = cu_k.back();
  std::mt19937_64 rng(17);
  std::vector<std::int32_t> ids(static_cast<size_t>(num_pages));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  table.assign(ids.begin(), ids.begin() + batch * max_pages);
  q = HostTensor(dtype, {total_q, kHeadsQ, c.head_dim});
  k_pages = HostTensor(dtype, {num_pages, c.page_size, kHeadsKv, c.head_dim}, /*pad=*/1);
  v_pages = HostTensor(dtype, {num_pages, c.page_size, kHeadsKv, c.head_dim}, /*pad=*/1);
  q.fill_normal(rng);
  k_pages.fill_normal(rng);
  v_pages.fill_normal(rng);
  k_packed = HostTensor(dtype, {total_k, kHeadsKv, c.head_dim});
  v_packed = HostTensor(dtype, {total_k, kHeadsKv, c.head_dim});
  const std::int64_t row = kHeadsKv * c.head_dim;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t j = 0; j < cu_k[b + 1] - cu_k[b]; ++j) {
      const std::int64_t page = table[b * max_pages + j / c.page_size];
      const std::int64_t from = (page * c.page_size + j % c.page_size) * row;
      for (std::int64_t e = 0; e < row; ++e) {
        k_packed.set((cu_k[b] + j) * row + e, k_pages.get(from + e));
        v_packed.set((cu_k[b] + j) * row + e, v_pages.get(from + e));
      }
    }
  }
  out_paged = HostTensor(dtype, {total_q, kHeadsQ, c.head_dim});
  out_packed = HostTensor(dtype, {total_q, kHeadsQ, c.head_dim});
  lse_paged = HostTensor(DType::kFloat32, {kHeadsQ, total_q});
  lse_packed = HostTensor(DType::kFloat32, {kHeadsQ, total_q});
}

ForwardParams PagedTensors::params(Backend backend, bool paged) {
  ForwardParams p;
  p.q = q.view();
  p.k = paged ? k_pages.view() : k_packed.view();
  p.v = paged ? v_pages.view() : v_packed.view();
  p.out = paged ? out_paged.view() : out_packed.view();
  p.lse = paged ? lse_paged.view() : lse_packed.view();
  p.backend = backend;
  p.causal = c.causal;
  p.window_left = c.window_left;
  p.cu_seqlens_q = make_view(cu_q.data(), DType::kInt32, Device::kCPU, {batch + 1});
  p.cu_seqlens_k = make_view(cu_k.data(), DType::kInt32, Device::kCPU, {batch + 1});
  p.max_seqlen_q = max_q;
  p.max_seqlen_k = max_k;
  if (paged) p.block_table = make_view(table.data(), DType::kInt32, Device::kCPU, {batch, max_pages});
  return p;
}

}  // namespace flashcore::testing
