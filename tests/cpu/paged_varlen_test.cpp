// Paged keys and values in the varlen forward (attention.h, "paged": flash_attn_varlen_func's
// block_table) on the CPU backends: a paged call must give exactly what the same call gives on the
// packed keys the pages hold (built here by hand, position by position, not by the library's
// gather), on the flash backend and the float64 reference, with options; and the paged arguments'
// validation names each argument.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/host_tensor.h"
#include "flashcore/attention.h"

namespace flashcore::testing {
namespace {

struct PagedCase {
  std::vector<std::int32_t> lengths_q;
  std::vector<std::int32_t> lengths_k;
  std::int64_t page_size;
  std::int64_t head_dim;
  bool causal;
  std::int64_t window_left;
};

std::vector<std::int32_t> offsets(const std::vector<std::int32_t>& lengths) {
  std::vector<std::int32_t> cu(lengths.size() + 1, 0);
  std::partial_sum(lengths.begin(), lengths.end(), cu.begin() + 1);
  return cu;
}

// The pages (strided: a padded pool), a shuffled block table, and the packed keys they hold.
struct PagedTensors {
  static constexpr std::int64_t kHeadsQ = 4, kHeadsKv = 2;
  PagedCase c;
  std::int64_t batch, max_pages, num_pages, max_q, max_k;
  std::vector<std::int32_t> cu_q, cu_k, table;
  HostTensor q, k_pages, v_pages, k_packed, v_packed, out_paged, out_packed, lse_paged, lse_packed;

  explicit PagedTensors(const PagedCase& paged)
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
    q = HostTensor(DType::kBFloat16, {total_q, kHeadsQ, c.head_dim});
    k_pages = HostTensor(DType::kBFloat16, {num_pages, c.page_size, kHeadsKv, c.head_dim}, /*pad=*/1);
    v_pages = HostTensor(DType::kBFloat16, {num_pages, c.page_size, kHeadsKv, c.head_dim}, /*pad=*/1);
    q.fill_normal(rng);
    k_pages.fill_normal(rng);
    v_pages.fill_normal(rng);
    k_packed = HostTensor(DType::kBFloat16, {total_k, kHeadsKv, c.head_dim});
    v_packed = HostTensor(DType::kBFloat16, {total_k, kHeadsKv, c.head_dim});
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
    out_paged = HostTensor(DType::kBFloat16, {total_q, kHeadsQ, c.head_dim});
    out_packed = HostTensor(DType::kBFloat16, {total_q, kHeadsQ, c.head_dim});
    lse_paged = HostTensor(DType::kFloat32, {kHeadsQ, total_q});
    lse_packed = HostTensor(DType::kFloat32, {kHeadsQ, total_q});
  }

  ForwardParams params(Backend backend, bool paged) {
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
};

class PagedVarlen : public ::testing::TestWithParam<std::tuple<PagedCase, Backend>> {};

TEST_P(PagedVarlen, EqualsTheSameCallOnThePackedKeys) {
  const auto& [paged_case, backend] = GetParam();
  PagedTensors t(paged_case);
  Status status = forward(t.params(backend, /*paged=*/true));
  ASSERT_TRUE(status.ok()) << status.message();
  status = forward(t.params(backend, /*paged=*/false));
  ASSERT_TRUE(status.ok()) << status.message();
  const std::vector<double> out_paged = t.out_paged.values(), out_packed = t.out_packed.values();
  const std::vector<double> lse_paged = t.lse_paged.values(), lse_packed = t.lse_packed.values();
  for (size_t i = 0; i < out_paged.size(); ++i) ASSERT_EQ(out_paged[i], out_packed[i]) << "out element " << i;
  for (size_t i = 0; i < lse_paged.size(); ++i) ASSERT_EQ(lse_paged[i], lse_packed[i]) << "lse element " << i;
}

const PagedCase kCases[] = {
    // an empty sequence, pages of 16, a head dim that is not a multiple of 8
    {{5, 3, 64}, {37, 0, 70}, 16, 40, false, -1},
    // causal, sliding window, pages of 7 (not a power of two), one query per sequence (decoding)
    {{1, 1, 1, 1}, {9, 50, 1, 23}, 7, 64, true, 8},
    // causal with more queries than keys in one sequence
    {{30, 12}, {20, 33}, 256, 32, true, -1},
};

INSTANTIATE_TEST_SUITE_P(Cpu, PagedVarlen,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::Values(Backend::kCpu, Backend::kCpuReference)));

// ---- validation ----

void expect_rejected(const ForwardParams& p, const std::string& text) {
  const Status status = forward(p);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find(text), std::string::npos) << status.message();
}

TEST(PagedVarlenValidation, NamesTheArgument) {
  PagedTensors t(kCases[0]);
  ASSERT_TRUE(forward(t.params(Backend::kCpu, true)).ok());

  ForwardParams p = t.params(Backend::kCpu, true);
  p.cu_seqlens_q = p.cu_seqlens_k = TensorView{};
  p.max_seqlen_q = p.max_seqlen_k = 0;
  expect_rejected(p, "block_table: pages need the varlen layout");

  p = t.params(Backend::kCpu, true);
  p.k = t.k_packed.view();
  expect_rejected(p, "k: expected rank 4 (num_pages, page_size, heads_kv, head_dim)");

  p = t.params(Backend::kCpu, true);
  p.block_table.dtype = DType::kFloat32;
  expect_rejected(p, "block_table: expected dtype int32");

  p = t.params(Backend::kCpu, true);
  p.block_table.shape[0] = t.batch - 1;
  expect_rejected(p, "block_table: expected 3 rows (batch, from cu_seqlens_k), got 2");

  p = t.params(Backend::kCpu, true);
  p.max_seqlen_k = t.max_pages * t.c.page_size + 1;
  expect_rejected(p, "max_seqlen_k: must be in [1, max_pages * page_size = " + std::to_string(t.max_pages * 16) + "]");

  const std::int32_t saved = t.table[1];
  t.table[1] = static_cast<std::int32_t>(t.num_pages);  // sequence 0's second page
  const std::string pages = std::to_string(t.num_pages);
  expect_rejected(t.params(Backend::kCpu, true),
                  "block_table: page id " + pages + " at [0, 1] is outside [0, num_pages = " + pages + ")");
  t.table[1] = -1;
  expect_rejected(t.params(Backend::kCpu, true), "block_table: page id -1 at [0, 1]");
  t.table[1] = saved;
  // A page no sequence reaches may hold anything.
  t.table[t.max_pages - 1] = -7;
  EXPECT_TRUE(forward(t.params(Backend::kCpu, true)).ok());

  t.cu_k[1] = t.cu_k[2] = 75;  // sequence 0 longer than max_seqlen_k (70)
  expect_rejected(t.params(Backend::kCpu, true), "cu_seqlens_k: sequence 0 has length 75");
  t.cu_k[1] = t.cu_k[2] = 37;

  p = t.params(Backend::kCpu, true);
  KernelFamily family;
  const Status status = selected_kernels(p, &family);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("block_table"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace flashcore::testing
