// Paged keys and values in the varlen forward (attention.h, "paged": flash_attn_varlen_func's
// block_table) on the CPU backends: a paged call must give exactly what the same call gives on the
// packed keys the pages hold (built by hand: common/paged_varlen_tensors.h), on the flash backend and
// the float64 reference, with options; and the paged arguments' validation names each argument.
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "common/paged_varlen_tensors.h"

namespace flashcore::testing {
namespace {

class PagedVarlen : public ::testing::TestWithParam<std::tuple<PagedCase, Backend>> {};

TEST_P(PagedVarlen, EqualsTheSameCallOnThePackedKeys) {
  const auto& [paged_case, backend] = GetParam();
  PagedTensors t(paged_case, DType::kBFloat16);
  Status status = forward(t.params(backend, /*paged=*/true));
  ASSERT_TRUE(status.ok()) << status.message();
  status = forward(t.params(backend, /*paged=*/false));
  ASSERT_TRUE(status.ok()) << status.message();
  const std::vector<double> out_paged = t.out_paged.values(), out_packed = t.out_packed.values();
  const std::vector<double> lse_paged = t.lse_paged.values(), lse_packed = t.lse_packed.values();
  for (size_t i = 0; i < out_paged.size(); ++i) ASSERT_EQ(out_paged[i], out_packed[i]) << "out element " << i;
  for (size_t i = 0; i < lse_paged.size(); ++i) ASSERT_EQ(lse_paged[i], lse_packed[i]) << "lse element " << i;
}

INSTANTIATE_TEST_SUITE_P(Cpu, PagedVarlen,
                         ::testing::Combine(::testing::ValuesIn(paged_cases()),
                                            ::testing::Values(Backend::kCpu, Backend::kCpuReference)));

// ---- validation ----

void expect_rejected(const ForwardParams& p, const std::string& text) {
  const Status status = forward(p);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find(text), std::string::npos) << status.message();
}

TEST(PagedVarlenValidation, NamesTheArgument) {
  PagedTensors t(paged_cases()[0], DType::kBFloat16);
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
