// merge_partials (flashcore/merge.h) on the CPU: attention over blocks of keys, merged, against the
// float64 reference on all the keys under FlashAttention's rule (one block at a time, in place and
// out of place, running result in float32 or in the inputs' dtype); the special rows (no key in
// either block, in one, NaN, +inf) exactly; and the argument checks, each naming its argument.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/problem.h"
#include "common/attention_tensors.h"
#include "common/reference_problem.h"
#include "flashcore/accuracy.h"
#include "flashcore/attention.h"
#include "flashcore/merge.h"
#include "flashcore/reference.h"

namespace flashcore::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Keys [begin, end) of a (batch, seqlen_k, heads_kv, head_dim) view.
TensorView key_block(const TensorView& t, std::int64_t begin, std::int64_t end) {
  TensorView block = t;
  block.data = static_cast<unsigned char*>(t.data) + begin * t.stride[1] * static_cast<std::int64_t>(dtype_size(t.dtype));
  block.shape[1] = end - begin;
  return block;
}

// One partial result: out in `dtype` and its LSE, over keys [begin, end).
struct Partial {
  Partial(const AttentionTensors& t, DType dtype, std::int64_t begin, std::int64_t end)
      : out(dtype, {t.shape.batch, t.shape.seqlen_q, t.shape.heads_q, t.shape.head_dim}),
        lse(DType::kFloat32, {t.shape.batch, t.shape.heads_q, t.shape.seqlen_q}) {
    ForwardParams p = t.forward_params(Backend::kCpu);
    p.k = key_block(p.k, begin, end);
    p.v = key_block(p.v, begin, end);
    if (dtype == t.dtype) {
      p.out = out.view();
    } else {  // a float32 running result starts as a 16-bit partial, widened
      staging = HostTensor(t.dtype, out.shape());
      p.out = staging.view();
    }
    p.lse = lse.view();
    status = forward(p);
    if (dtype != t.dtype) {
      for (std::int64_t i = 0; i < out.numel(); ++i) out.set(i, staging.get(i));
    }
  }
  HostTensor out, lse, staging;
  Status status;
};

MergeParams merge_into_first(Partial& a, const Partial& b) {
  MergeParams m;
  m.out_a = a.out.view();
  m.lse_a = a.lse.view();
  m.out_b = b.out.view();
  m.lse_b = b.lse.view();
  m.out = a.out.view();
  m.lse = a.lse.view();
  m.num_threads = 2;
  return m;
}

// The merged result against the float64 reference over every key, out under the forward's rule,
// the LSE within float32 rounding.
void expect_matches_reference(const AttentionTensors& t, const HostTensor& out, const HostTensor& lse) {
  detail::AttentionProblem p;
  ASSERT_TRUE(detail::validate_forward(t.forward_params(Backend::kCpu), &p).ok());
  const ReferenceProblem r = reference_problem(p);
  const std::vector<double> q = t.q.values(), k = t.k.values(), v = t.v.values();
  std::vector<double> ref_out(static_cast<std::size_t>(t.out.numel())), ref_lse(static_cast<std::size_t>(t.lse.numel()));
  ASSERT_TRUE(reference_forward(r, q.data(), k.data(), v.data(), ref_out.data(), ref_lse.data()).ok());
  const accuracy::BaselineForward baseline = accuracy::baseline_forward(r, t.dtype, q, k, v);
  std::vector<double> got = out.values();
  if (out.dtype() != t.dtype) {  // a float32 result is judged as the dtype it would be handed back in
    for (double& x : got) x = accuracy::round_to(t.dtype, x);
  }
  const accuracy::Comparison c = accuracy::compare_to_reference("merged out", t.dtype, 2.0, got, baseline.out, ref_out);
  EXPECT_TRUE(c.ok) << c.message;
  const std::vector<double> got_lse = lse.values();
  for (std::size_t i = 0; i < got_lse.size(); ++i) {
    ASSERT_NEAR(got_lse[i], ref_lse[i], 4e-6 * (1.0 + std::abs(ref_lse[i]))) << "lse element " << i;
  }
}

class MergeBlocks : public ::testing::TestWithParam<DType> {};

TEST_P(MergeBlocks, TwoBlocksMatchAttentionOverAllKeys) {
  const DType dtype = GetParam();
  AttentionTensors t({2, 37, 90, 4, 2, 64, false}, dtype, Layout::kPadded, 11);
  Partial a(t, dtype, 0, 41), b(t, dtype, 41, 90);
  ASSERT_TRUE(a.status.ok() && b.status.ok()) << a.status.message() << b.status.message();
  // Out of place, into a padded output of the dtype.
  HostTensor out(dtype, a.out.shape(), 3), lse(DType::kFloat32, a.lse.shape(), 5);
  MergeParams m = merge_into_first(a, b);
  m.out = out.view();
  m.lse = lse.view();
  const Status s = merge_partials(m);
  ASSERT_TRUE(s.ok()) << s.message();
  expect_matches_reference(t, out, lse);
}

TEST_P(MergeBlocks, ThreeBlocksInPlaceInEitherOrderAndPrecision) {
  const DType dtype = GetParam();
  AttentionTensors t({1, 50, 130, 4, 4, 32, false}, dtype, Layout::kContiguous, 12);
  for (const DType running : {DType::kFloat32, dtype}) {
    // Blocks folded in as 0, 1, 2 and as 2, 0, 1: the same answer up to float32 rounding.
    Partial first(t, running, 0, 30), second(t, dtype, 30, 31), third(t, dtype, 31, 130);
    ASSERT_TRUE(merge_partials(merge_into_first(first, second)).ok());
    ASSERT_TRUE(merge_partials(merge_into_first(first, third)).ok());
    expect_matches_reference(t, first.out, first.lse);

    Partial x(t, running, 31, 130), y(t, dtype, 0, 30), z(t, dtype, 30, 31);
    ASSERT_TRUE(merge_partials(merge_into_first(x, y)).ok());
    ASSERT_TRUE(merge_partials(merge_into_first(x, z)).ok());
    expect_matches_reference(t, x.out, x.lse);
  }
}

std::string dtype_param_name(const ::testing::TestParamInfo<DType>& param) {
  return param.param == DType::kFloat16 ? "fp16" : "bf16";
}

INSTANTIATE_TEST_SUITE_P(Cpu, MergeBlocks, ::testing::Values(DType::kFloat16, DType::kBFloat16), dtype_param_name);

// Rows with hand-picked LSE pairs, one head of head_dim 2: out_a = (1, 2), out_b = (10, 20).
TEST(MergePartials, SpecialRowsExactly) {
  const std::vector<std::pair<float, float>> pairs = {
      {-kInf, -kInf}, {-kInf, 1.5f}, {0.25f, -kInf}, {3.0f, 3.0f}, {kNaN, 1.0f}, {1.0f, kNaN}, {kInf, 1.0f}, {80.0f, 81.0f}};
  const std::int64_t rows = static_cast<std::int64_t>(pairs.size());
  HostTensor out_a(DType::kFloat32, {1, rows, 1, 2}), out_b(DType::kFloat32, {1, rows, 1, 2});
  HostTensor lse_a(DType::kFloat32, {1, 1, rows}), lse_b(DType::kFloat32, {1, 1, rows});
  HostTensor out(DType::kFloat32, {1, rows, 1, 2}), lse(DType::kFloat32, {1, 1, rows});
  for (std::int64_t r = 0; r < rows; ++r) {
    out_a.set(2 * r, 1.0);
    out_a.set(2 * r + 1, 2.0);
    out_b.set(2 * r, 10.0);
    out_b.set(2 * r + 1, 20.0);
    lse_a.set(r, pairs[static_cast<std::size_t>(r)].first);
    lse_b.set(r, pairs[static_cast<std::size_t>(r)].second);
  }
  MergeParams m;
  m.out_a = out_a.view();
  m.lse_a = lse_a.view();
  m.out_b = out_b.view();
  m.lse_b = lse_b.view();
  m.out = out.view();
  m.lse = lse.view();
  ASSERT_TRUE(merge_partials(m).ok());
  // Neither block saw a key: 0 and -inf.
  EXPECT_EQ(out.get(0), 0.0);
  EXPECT_EQ(out.get(1), 0.0);
  EXPECT_EQ(lse.get(0), -kInf);
  // One side saw nothing: the other side exactly.
  EXPECT_EQ(out.get(2), 10.0);
  EXPECT_EQ(out.get(3), 20.0);
  EXPECT_EQ(lse.get(1), 1.5);
  EXPECT_EQ(out.get(4), 1.0);
  EXPECT_EQ(out.get(5), 2.0);
  EXPECT_EQ(lse.get(2), 0.25);
  // Equal LSEs: the mean, and lse + log 2.
  EXPECT_FLOAT_EQ(out.get(6), 5.5);
  EXPECT_FLOAT_EQ(out.get(7), 11.0);
  EXPECT_FLOAT_EQ(lse.get(3), 3.0f + std::log(2.0f));
  // NaN on either side, and +inf: NaN.
  for (std::int64_t r = 4; r <= 6; ++r) {
    EXPECT_TRUE(std::isnan(out.get(2 * r)) && std::isnan(out.get(2 * r + 1)) && std::isnan(lse.get(r))) << "row " << r;
  }
  // Large LSEs do not overflow: weights 1/(1+e) and e/(1+e).
  const double wa = 1.0 / (1.0 + std::exp(1.0));
  EXPECT_NEAR(out.get(14), wa * 1.0 + (1.0 - wa) * 10.0, 1e-5);
  EXPECT_NEAR(lse.get(7), 81.0 + std::log1p(std::exp(-1.0)), 1e-5);
}

// ---- validation ----

struct MergeTensors {
  MergeTensors()
      : out_a(DType::kBFloat16, {2, 5, 3, 8}),
        out_b(DType::kBFloat16, {2, 5, 3, 8}),
        out(DType::kFloat32, {2, 5, 3, 8}),
        lse_a(DType::kFloat32, {2, 3, 5}),
        lse_b(DType::kFloat32, {2, 3, 5}),
        lse(DType::kFloat32, {2, 3, 5}) {
    params.out_a = out_a.view();
    params.out_b = out_b.view();
    params.out = out.view();
    params.lse_a = lse_a.view();
    params.lse_b = lse_b.view();
    params.lse = lse.view();
  }
  HostTensor out_a, out_b, out, lse_a, lse_b, lse;
  MergeParams params;
};

void expect_rejected(const MergeParams& params, const std::string& argument) {
  const Status s = merge_partials(params);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("flashcore::merge_partials: " + argument + ":"), std::string::npos) << s.message();
}

TEST(MergePartialsValidation, EachBadArgumentIsNamed) {
  {
    MergeTensors t;
    t.params.out_a.data = nullptr;
    expect_rejected(t.params, "out_a");
  }
  {
    MergeTensors t;
    t.params.out_b.shape[2] = 2;
    expect_rejected(t.params, "out_b");
  }
  {
    MergeTensors t;
    t.params.out.rank = 3;
    expect_rejected(t.params, "out");
  }
  {
    MergeTensors t;
    t.params.lse_a.dtype = DType::kBFloat16;
    expect_rejected(t.params, "lse_a");
  }
  {
    MergeTensors t;
    t.params.lse_b.shape[1] = 5;  // (batch, seqlen, heads) instead of (batch, heads, seqlen)
    t.params.lse_b.shape[2] = 3;
    expect_rejected(t.params, "lse_b");
  }
  {
    MergeTensors t;
    t.params.out.stride[3] = 2;
    expect_rejected(t.params, "out");
  }
  {
    MergeTensors t;
    t.params.backend = Backend::kCuda;
    expect_rejected(t.params, "backend");
  }
  {
    MergeTensors t;
    t.params.num_threads = -1;
    expect_rejected(t.params, "num_threads");
  }
}

TEST(MergePartialsValidation, OverlapOnlyAsTheVeryInput) {
  MergeTensors t;
  // In place on either side: allowed.
  MergeParams in_place = t.params;
  in_place.out = in_place.out_b;
  in_place.lse = in_place.lse_a;
  EXPECT_TRUE(merge_partials(in_place).ok());
  // The same memory with other strides: rejected.
  MergeParams shifted = t.params;
  shifted.out = shifted.out_a;
  shifted.out.shape[1] = 4;
  shifted.out_a.shape[1] = 4;
  shifted.out_b.shape[1] = 4;
  shifted.lse_a.shape[2] = shifted.lse_b.shape[2] = shifted.lse.shape[2] = 4;
  shifted.out.data = static_cast<unsigned char*>(shifted.out.data) + 2 * shifted.out.stride[1];  // one row on
  expect_rejected(shifted, "out");
  // The output LSE over an input's memory.
  MergeParams lse_over_out = t.params;
  lse_over_out.lse = t.lse_b.view();
  lse_over_out.lse.stride[2] = 1;
  lse_over_out.lse.stride[1] = 5;
  lse_over_out.lse.stride[0] = 14;  // overlaps lse_b but is not it
  expect_rejected(lse_over_out, "lse");
}

}  // namespace
}  // namespace flashcore::testing
