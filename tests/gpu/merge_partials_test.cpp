// merge_partials (flashcore/merge.h) on the GPU against the CPU backend on the same inputs: random
// partial results with some rows that saw no key (-inf), every mix of 16-bit and float32 outputs,
// padded strides, in place and out of place. Both backends run common/merge_weights.h's
// arithmetic; they may differ by the last bit of expf/logf, so results must agree to 8 float32 ulp
// of the partials' magnitude plus one ulp of the output dtype. Outputs are NaN-poisoned on the device first, so a row the
// kernel skipped fails.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "common/host_tensor.h"
#include "device_tensors.h"
#include "flashcore/accuracy.h"
#include "flashcore/merge.h"

namespace flashcore::testing {
namespace {

using MergeCase = std::tuple<DType, DType, bool>;  // partials' dtype, output's dtype, in place

class CudaMergePartials : public ::testing::TestWithParam<MergeCase> {};

void fill_lse(HostTensor& lse, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> value(-6.0, 6.0);
  std::uniform_int_distribution<int> blind(0, 9);
  for (std::int64_t i = 0; i < lse.numel(); ++i) {
    lse.set(i, blind(rng) == 0 ? -std::numeric_limits<double>::infinity() : value(rng));
  }
}

TEST_P(CudaMergePartials, MatchesCpu) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const auto [partial_dtype, out_dtype, in_place] = GetParam();
  const std::int64_t batch = 2, seqlen = 75, heads = 6, head_dim = 72;  // head_dim not a multiple of 32
  std::mt19937_64 rng(17);
  // In place, out is out_a itself: out_a then holds the output's dtype.
  HostTensor out_a(in_place ? out_dtype : partial_dtype, {batch, seqlen, heads, head_dim}, 8);
  HostTensor out_b(partial_dtype, {batch, seqlen, heads, head_dim}, 3);
  HostTensor lse_a(DType::kFloat32, {batch, heads, seqlen}, 2), lse_b(DType::kFloat32, {batch, heads, seqlen});
  HostTensor out(out_dtype, {batch, seqlen, heads, head_dim}), lse(DType::kFloat32, {batch, heads, seqlen}, 1);
  out_a.fill_normal(rng);
  out_b.fill_normal(rng);
  fill_lse(lse_a, rng);
  fill_lse(lse_b, rng);

  DeviceMirror d_out_a(out_a), d_out_b(out_b), d_lse_a(lse_a), d_lse_b(lse_b), d_out(out), d_lse(lse);
  d_out_a.upload(out_a);
  d_out_b.upload(out_b);
  d_lse_a.upload(lse_a);
  d_lse_b.upload(lse_b);

  MergeParams cpu;
  cpu.out_a = out_a.view();
  cpu.lse_a = lse_a.view();
  cpu.out_b = out_b.view();
  cpu.lse_b = lse_b.view();
  cpu.out = in_place ? out_a.view() : out.view();
  cpu.lse = in_place ? lse_a.view() : lse.view();
  MergeParams gpu;
  gpu.out_a = d_out_a.view();
  gpu.lse_a = d_lse_a.view();
  gpu.out_b = d_out_b.view();
  gpu.lse_b = d_lse_b.view();
  gpu.out = in_place ? d_out_a.view() : d_out.view();
  gpu.lse = in_place ? d_lse_a.view() : d_lse.view();

  Status s = merge_partials(gpu);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  HostTensor got_out(out_dtype, {batch, seqlen, heads, head_dim}, in_place ? 8 : 0);
  HostTensor got_lse(DType::kFloat32, {batch, heads, seqlen}, in_place ? 2 : 1);
  (in_place ? d_out_a : d_out).download_into(got_out);
  (in_place ? d_lse_a : d_lse).download_into(got_lse);
  // The partials' magnitudes, before the in-place CPU merge overwrites out_a.
  const std::vector<double> a_values = out_a.values(), b_values = out_b.values();
  s = merge_partials(cpu);
  ASSERT_TRUE(s.ok()) << s.message();
  const HostTensor& want_out = in_place ? out_a : out;
  const HostTensor& want_lse = in_place ? lse_a : lse;

  for (std::int64_t i = 0; i < want_lse.numel(); ++i) {
    const double want = want_lse.get(i), got = got_lse.get(i);
    if (std::isinf(want)) {
      ASSERT_EQ(got, want) << "lse element " << i;
    } else {
      // The GPU's expf/logf and the host libm's differ by an ulp or two each, and the merge composes
      // three of them on values of order 1 (the partial LSEs), so the error is a few ulp of 1 even
      // where the merged LSE is near 0 (measured on the H100: 9e-8 at lse -0.011).
      ASSERT_NEAR(got, want, 8 * accuracy::ulp_at(DType::kFloat32, std::max(std::abs(want), 1.0)))
          << "lse element " << i;
    }
  }
  for (std::int64_t i = 0; i < want_out.numel(); ++i) {
    const double want = want_out.get(i), got = got_out.get(i);
    // The weights' last-bit differences scale the partials, not the merged value, which can be near 0
    // where they cancel.
    const double partials = std::max(std::abs(a_values[static_cast<size_t>(i)]), std::abs(b_values[static_cast<size_t>(i)]));
    const double tolerance = 8 * accuracy::ulp_at(DType::kFloat32, std::max(partials, std::abs(want))) +
                             accuracy::ulp_at(out_dtype, want);
    ASSERT_NEAR(got, want, tolerance) << "out element " << i;
  }
}

std::string case_name(const ::testing::TestParamInfo<MergeCase>& info) {
  const auto [partial, out, in_place] = info.param;
  return std::string(dtype_name(partial)) + "_into_" + dtype_name(out) + (in_place ? "_in_place" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Gpu, CudaMergePartials,
    ::testing::Combine(::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32),
                       ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32), ::testing::Bool()),
    case_name);

}  // namespace
}  // namespace flashcore::testing
