// Dropout on the CPU (attention.h, "dropout"): Philox4x32-10 against its published known answers;
// the fast paths' batched draws (common/dropout.h, cpu/dropout.h) against the reference's plain
// one, entry by entry; the keep rate; the CPU flash forward and backward against the float64
// reference given the same stream, alone and with every other option, under FlashAttention's rule;
// varlen sequences drawing their own batch index's stream; and the validation of dropout_p.
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "api/problem.h"
#include "common/reference_check.h"
#include "common/attention_tensors.h"
#include "common/dropout.h"
#include "common/philox.h"
#include "common/reference_problem.h"
#include "cpu/dropout.h"
#include "cpu/reference.h"
#include "cpu/reference_dropout.h"
#include "flashcore/accuracy.h"
#include "flashcore/attention.h"

namespace flashcore {
inline void PrintTo(DType dtype, std::ostream* os) { *os << dtype_name(dtype); }
}  // namespace flashcore

namespace flashcore::testing {
namespace {

using namespace flashcore::accuracy;

// Random123's known-answer vectors for philox4x32_10 (kat_vectors): counter, key -> output.
TEST(Philox, MatchesTheKnownAnswers) {
  struct Kat {
    Philox4x32 counter;
    std::uint32_t key0, key1;
    Philox4x32 expected;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, 0, 0, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       0xffffffffu,
       0xffffffffu,
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       0xa4093822u,
       0x299f31d0u,
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Kat& k : kats) {
    const Philox4x32 r = philox4x32_10(k.counter, k.key0, k.key1);
    EXPECT_EQ(r.x, k.expected.x);
    EXPECT_EQ(r.y, k.expected.y);
    EXPECT_EQ(r.z, k.expected.z);
    EXPECT_EQ(r.w, k.expected.w);
  }
}

detail::AttentionProblem dropout_problem(float p, std::uint64_t seed, std::uint32_t offset) {
  detail::AttentionProblem problem;
  problem.batch = 3;
  problem.heads_q = 5;
  problem.dropout_p = p;
  problem.dropout_seed = seed;
  problem.dropout_offset = offset;
  return problem;
}

cpu::ReferenceDropout reference_of(const detail::AttentionProblem& p) {
  cpu::ReferenceDropout d;
  d.p = p.dropout_p;
  d.seed = p.dropout_seed;
  d.offset = p.dropout_offset;
  d.heads_q = p.heads_q;
  d.batch0 = p.dropout_batch0;
  return d;
}

TEST(DropoutStream, BatchedDrawsMatchTheReferenceEntryByEntry) {
  for (const float p : {0.1f, 0.5f, 0.87f}) {
    detail::AttentionProblem problem = dropout_problem(p, 0x0123456789abcdefull, 77);
    problem.dropout_batch0 = 1;
    const cpu::ReferenceDropout ref = reference_of(problem);
    const float factor = 1.0f / (1.0f - p);
    std::vector<float> z(200);
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t h = 0; h < problem.heads_q; h += 2) {
        const cpu::DropoutRows rows(problem, b, h);
        for (std::int64_t i = 0; i < 40; ++i)
          for (const std::int64_t col0 : {std::int64_t{0}, std::int64_t{37}, std::int64_t{128}}) {
            rows.factors(i, col0, 150, z.data());
            for (std::int64_t j = 0; j < 150; ++j) {
              ASSERT_EQ(z[j], ref.keeps(b, h, i, col0 + j) ? factor : 0.0f)
                  << "p " << p << " b " << b << " h " << h << " i " << i << " j " << col0 + j;
            }
          }
      }
  }
}

TEST(DropoutStream, KeepsFlashAttnsFractionAndDependsOnSeedOffsetAndPosition) {
  const float p = 0.1f;
  const cpu::ReferenceDropout a = reference_of(dropout_problem(p, 42, 0));
  const cpu::ReferenceDropout other_offset = reference_of(dropout_problem(p, 42, 1));
  const cpu::ReferenceDropout other_seed = reference_of(dropout_problem(p, 43, 0));
  std::int64_t kept = 0, same_offset = 0, same_seed = 0, total = 0;
  for (std::int64_t i = 0; i < 256; ++i)
    for (std::int64_t j = 0; j < 256; ++j) {
      const bool k = a.keeps(0, 1, i, j);
      kept += k;
      same_offset += k == other_offset.keeps(0, 1, i, j);
      same_seed += k == other_seed.keeps(0, 1, i, j);
      ++total;
    }
  // Kept with probability (floor(255 * 0.9) + 1) / 256 = 230 / 256, as flash_attn 2.x keeps.
  const double expected = 230.0 / 256.0;
  const double sigma = std::sqrt(expected * (1.0 - expected) / static_cast<double>(total));
  EXPECT_NEAR(static_cast<double>(kept) / total, expected, 5.0 * sigma);
  // Independent streams agree where both keep or both drop: p² + (1 - p)², about 0.82 here.
  const double agree = expected * expected + (1 - expected) * (1 - expected);
  EXPECT_NEAR(static_cast<double>(same_offset) / total, agree, 0.02);
  EXPECT_NEAR(static_cast<double>(same_seed) / total, agree, 0.02);
}

struct DropoutCase {
  const char* name;
  AttentionShape shape;  // batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal
  float dropout_p;
  std::int64_t window_left = -1;
  float softcap = 0.0f;
  bool alibi = false;
};

const std::vector<DropoutCase>& dropout_cases() {
  static const std::vector<DropoutCase> cases = {
      {"p10", {2, 130, 150, 2, 2, 64, false}, 0.1f},
      {"p50_causal_gqa", {1, 200, 170, 4, 2, 64, true}, 0.5f},
      {"p17_q_longer_odd", {1, 93, 41, 2, 1, 40, false}, 0.17f},
      {"p30_all_options", {2, 160, 260, 4, 2, 96, true}, 0.3f, 70, 1.5f, true},
      {"p90", {1, 64, 300, 2, 2, 32, false}, 0.9f},
  };
  return cases;
}

using DropoutParam = std::tuple<DropoutCase, DType>;

void PrintTo(const DropoutCase& c, std::ostream* os) { *os << c.name << " (" << shape_name(c.shape) << ")"; }

std::string param_name(const ::testing::TestParamInfo<DropoutParam>& info) {
  const DType dtype = std::get<1>(info.param);
  return std::string(std::get<0>(info.param).name) +
         (dtype == DType::kFloat16 ? "_fp16" : dtype == DType::kBFloat16 ? "_bf16" : "_fp32");
}

AttentionTensors make_tensors(const DropoutParam& param) {
  const auto& [c, dtype] = param;
  AttentionTensors t(c.shape, dtype, Layout::kPadded, 1000 + static_cast<std::uint64_t>(c.shape.seqlen_q) +
                                                          static_cast<std::uint64_t>(dtype));
  t.options.dropout_p = c.dropout_p;
  t.options.dropout_seed = 0x9e3779b97f4a7c15ull ^ static_cast<std::uint64_t>(c.shape.seqlen_k);
  t.options.dropout_offset = 3;
  t.options.window_left = c.window_left;
  t.options.softcap = c.softcap;
  if (c.alibi) {
    t.options.alibi_per_batch = true;
    t.options.alibi_slopes = random_alibi_slopes(c.shape.batch * c.shape.heads_q, 7);
  }
  return t;
}

class Dropout : public ::testing::TestWithParam<DropoutParam> {};

TEST_P(Dropout, ForwardMatchesReferenceWithinTwiceTheSamePrecisionError) {
  AttentionTensors t = make_tensors(GetParam());
  const ForwardParams params = t.forward_params(Backend::kCpu);
  const Status status = forward(params);
  ASSERT_TRUE(status.ok()) << status.message();
  for (const Comparison& c : compare_forward_to_reference(t)) EXPECT_TRUE(c.ok) << c.message;

  // The same call without dropout gives a different output (the mask is applied) and the same LSE.
  AttentionTensors plain = make_tensors(GetParam());
  plain.options.dropout_p = 0.0f;
  ASSERT_TRUE(forward(plain.forward_params(Backend::kCpu)).ok());
  EXPECT_NE(plain.out.values(), t.out.values());
  EXPECT_EQ(plain.lse.values(), t.lse.values());
}

TEST_P(Dropout, BackwardMatchesReferenceWithinThriceTheSamePrecisionError) {
  AttentionTensors t = make_tensors(GetParam());
  Status status = forward(t.forward_params(Backend::kCpu));
  ASSERT_TRUE(status.ok()) << status.message();
  const BackwardParams params = t.backward_params(Backend::kCpu);
  status = backward(params);
  ASSERT_TRUE(status.ok()) << status.message();
  for (const Comparison& c : compare_backward_to_reference(t)) EXPECT_TRUE(c.ok) << c.message;
}

INSTANTIATE_TEST_SUITE_P(Cases, Dropout,
                         ::testing::Combine(::testing::ValuesIn(dropout_cases()),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32)),
                         param_name);

// The reference's gradients are those of its forward: central differences of sum(out * dout) in
// float64 with the mask held fixed (the same seed), at a few entries of q, k and v.
TEST(DropoutReference, GradientsMatchFiniteDifferences) {
  ReferenceProblem r;
  r.batch = 1, r.seqlen_q = 20, r.seqlen_k = 24, r.heads_q = 2, r.heads_kv = 1, r.head_dim = 8;
  r.softmax_scale = 0.35, r.causal = true, r.dropout_p = 0.4, r.dropout_seed = 99, r.dropout_offset = 5;
  const std::size_t nq = 20 * 2 * 8, nk = 24 * 8;
  std::vector<double> q(nq), k(nk), v(nk), dout(nq);
  std::uint64_t s = 1;
  auto next = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(s >> 11) / 9007199254740992.0 - 0.5;
  };
  for (auto* a : {&q, &k, &v, &dout})
    for (double& x : *a) x = next();
  std::vector<double> dq(nq), dk(nk), dv(nk);
  ASSERT_TRUE(reference_backward(r, q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(), dv.data()).ok());
  auto loss = [&] {
    std::vector<double> out(nq), lse(20 * 2);
    EXPECT_TRUE(reference_forward(r, q.data(), k.data(), v.data(), out.data(), lse.data()).ok());
    double l = 0.0;
    for (std::size_t e = 0; e < nq; ++e) l += out[e] * dout[e];
    return l;
  };
  const double eps = 1e-6;
  for (auto [x, g] : {std::pair{&q, &dq}, std::pair{&k, &dk}, std::pair{&v, &dv}}) {
    for (const std::size_t e : {std::size_t{3}, std::size_t{61}, std::size_t{150}}) {
      const double saved = (*x)[e];
      (*x)[e] = saved + eps;
      const double up = loss();
      (*x)[e] = saved - eps;
      const double down = loss();
      (*x)[e] = saved;
      EXPECT_NEAR((up - down) / (2 * eps), (*g)[e], 1e-7) << "entry " << e;
    }
  }
}

TEST(DropoutValidation, RejectsDropoutPOutsideZeroToOneNamingIt) {
  AttentionTensors t({1, 16, 16, 1, 1, 32, false}, DType::kBFloat16, Layout::kContiguous, 1);
  for (const float p : {-0.1f, 1.0f, 1.5f, NAN, INFINITY}) {
    t.options.dropout_p = p;
    const Status f = forward(t.forward_params(Backend::kCpu));
    EXPECT_EQ(f.code(), StatusCode::kInvalidArgument) << p;
    EXPECT_NE(f.message().find("dropout_p"), std::string::npos) << f.message();
    const Status b = backward(t.backward_params(Backend::kCpu));
    EXPECT_EQ(b.code(), StatusCode::kInvalidArgument) << p;
    EXPECT_NE(b.message().find("dropout_p"), std::string::npos) << b.message();
  }
}

TEST(DropoutDeterminism, SameSeedSameBitsOnEveryThreadCount) {
  AttentionTensors a({2, 300, 300, 2, 2, 64, true}, DType::kBFloat16, Layout::kContiguous, 5);
  a.options.dropout_p = 0.2f;
  a.options.dropout_seed = 1234;
  ForwardParams fa = a.forward_params(Backend::kCpu);
  fa.num_threads = 1;
  ASSERT_TRUE(forward(fa).ok());
  BackwardParams ba = a.backward_params(Backend::kCpu);
  ba.num_threads = 1;
  ASSERT_TRUE(backward(ba).ok());
  AttentionTensors b({2, 300, 300, 2, 2, 64, true}, DType::kBFloat16, Layout::kContiguous, 5);
  b.options = a.options;
  ForwardParams fb = b.forward_params(Backend::kCpu);
  fb.num_threads = 3;
  ASSERT_TRUE(forward(fb).ok());
  BackwardParams bb = b.backward_params(Backend::kCpu);
  bb.num_threads = 3;
  ASSERT_TRUE(backward(bb).ok());
  EXPECT_EQ(a.out.values(), b.out.values());
  EXPECT_EQ(a.dq.values(), b.dq.values());
  EXPECT_EQ(a.dk.values(), b.dk.values());
  EXPECT_EQ(a.dv.values(), b.dv.values());
}

}  // namespace
}  // namespace flashcore::testing
