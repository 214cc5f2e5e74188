// Sliding window, softcap and ALiBi on the CPU: each alone and combined (with GQA, causal and
// seqlen_q != seqlen_k), forward and backward against the float64 reference under FlashAttention's
// rule; the reference itself against hand-worked cases; the window's block bounds (key_range.h)
// against the rule element by element; and the validation of the three arguments.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "api/problem.h"
#include "common/reference_check.h"
#include "common/attention_tensors.h"
#include "common/reference_problem.h"
#include "cpu/key_range.h"
#include "cpu/reference.h"
#include "flashcore/accuracy.h"
#include "flashcore/attention.h"
#include "flashcore/reference.h"

namespace flashcore {
inline void PrintTo(DType dtype, std::ostream* os) { *os << dtype_name(dtype); }
}  // namespace flashcore

namespace flashcore::testing {
namespace {

using namespace flashcore::accuracy;

struct OptionCase {
  const char* name;
  AttentionShape shape;  // batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal
  Layout layout;
  std::int64_t window_left = -1;
  std::int64_t window_right = -1;
  float softcap = 0.0f;
  int alibi = 0;  // 0: none, 1: (heads_q) slopes, 2: (batch, heads_q) slopes
};

const std::vector<OptionCase>& option_cases() {
  static const std::vector<OptionCase> cases = {
      {"window_symmetric", {1, 300, 300, 2, 2, 64, false}, Layout::kContiguous, 32, 32},
      {"window_left_causal_gqa", {1, 300, 300, 4, 2, 64, true}, Layout::kPadded, 50, -1},
      {"window_right_only", {1, 200, 130, 2, 2, 32, false}, Layout::kContiguous, -1, 10},
      {"window_q_longer_empty_rows", {1, 300, 100, 2, 2, 64, false}, Layout::kContiguous, 20, 5},
      {"window_q_shorter_causal", {2, 70, 333, 4, 2, 40, true}, Layout::kPadded, 64, -1},
      {"window_zero", {1, 130, 130, 2, 2, 32, false}, Layout::kContiguous, 0, 0},
      {"window_wider_than_seq", {1, 90, 70, 2, 1, 32, false}, Layout::kContiguous, 500, 500},
      {"softcap", {1, 200, 200, 2, 2, 64, false}, Layout::kContiguous, -1, -1, 2.0f},
      {"softcap_causal_gqa", {1, 150, 150, 4, 2, 64, true}, Layout::kPadded, -1, -1, 1.0f},
      {"alibi", {2, 150, 170, 2, 2, 64, false}, Layout::kContiguous, -1, -1, 0.0f, 1},
      {"alibi_per_batch_causal_mqa", {2, 130, 100, 4, 1, 32, true}, Layout::kContiguous, -1, -1, 0.0f, 2},
      {"all_gqa", {2, 200, 230, 4, 2, 64, false}, Layout::kPadded, 40, 8, 3.0f, 2},
      {"all_causal_q_shorter", {1, 190, 260, 6, 2, 96, true}, Layout::kContiguous, 70, -1, 1.5f, 1},
      {"all_causal_q_longer", {1, 260, 190, 2, 1, 32, true}, Layout::kContiguous, 33, -1, 0.7f, 2},
  };
  return cases;
}

using OptionParam = std::tuple<OptionCase, DType>;

void PrintTo(const OptionCase& c, std::ostream* os) { *os << c.name << " (" << shape_name(c.shape) << ")"; }

std::string param_name(const ::testing::TestParamInfo<OptionParam>& info) {
  const DType dtype = std::get<1>(info.param);
  return std::string(std::get<0>(info.param).name) +
         (dtype == DType::kFloat16 ? "_fp16" : dtype == DType::kBFloat16 ? "_bf16" : "_fp32");
}

std::uint64_t seed_of(const OptionParam& p) {
  std::uint64_t h = 1469598103934665603ull;
  for (const char* c = std::get<0>(p).name; *c; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
  return h + static_cast<std::uint64_t>(std::get<1>(p));
}

AttentionTensors make_tensors(const OptionParam& param) {
  const auto& [c, dtype] = param;
  AttentionTensors t(c.shape, dtype, c.layout, seed_of(param));
  t.options.window_left = c.window_left;
  t.options.window_right = c.window_right;
  t.options.softcap = c.softcap;
  if (c.alibi != 0) {
    t.options.alibi_per_batch = c.alibi == 2;
    const std::int64_t count = c.shape.heads_q * (c.alibi == 2 ? c.shape.batch : 1);
    t.options.alibi_slopes = random_alibi_slopes(count, seed_of(param) + 1);
  }
  return t;
}

class ScoreOptions : public ::testing::TestWithParam<OptionParam> {};

TEST_P(ScoreOptions, ForwardMatchesReferenceWithinTwiceTheSamePrecisionError) {
  AttentionTensors t = make_tensors(GetParam());
  const ForwardParams params = t.forward_params(Backend::kCpu);
  const Status status = forward(params);
  ASSERT_TRUE(status.ok()) << status.message();
  for (const Comparison& c : compare_forward_to_reference(t)) EXPECT_TRUE(c.ok) << c.message;
}

TEST_P(ScoreOptions, BackwardMatchesReferenceWithinThriceTheSamePrecisionError) {
  AttentionTensors t = make_tensors(GetParam());
  Status status = forward(t.forward_params(Backend::kCpu));
  ASSERT_TRUE(status.ok()) << status.message();
  const BackwardParams params = t.backward_params(Backend::kCpu);
  status = backward(params);
  ASSERT_TRUE(status.ok()) << status.message();
  for (const Comparison& c : compare_backward_to_reference(t)) EXPECT_TRUE(c.ok) << c.message;
}

INSTANTIATE_TEST_SUITE_P(Cases, ScoreOptions,
                         ::testing::Combine(::testing::ValuesIn(option_cases()),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16,
                                                              DType::kFloat32)),
                         param_name);

// ---- the reference against hand-worked cases ----

// q = 0 makes every score 0, so out is the mean of the visible v rows (plus ALiBi's weights): which
// keys a row sees can be read off the output. v_j = j + 1 in every dimension.
std::vector<double> reference_rows(ReferenceProblem p, std::vector<double>* lse) {
  p.batch = 1;
  p.heads_q = p.heads_kv = 1;
  p.head_dim = 2;
  p.softmax_scale = 1.0;
  std::vector<double> q(p.seqlen_q * 2, 0.0), k(p.seqlen_k * 2, 0.5), v(p.seqlen_k * 2), out(p.seqlen_q * 2);
  for (std::int64_t j = 0; j < p.seqlen_k; ++j) v[2 * j] = v[2 * j + 1] = static_cast<double>(j + 1);
  lse->assign(p.seqlen_q, 0.0);
  EXPECT_TRUE(reference_forward(p, q.data(), k.data(), v.data(), out.data(), lse->data(), 1).ok());
  std::vector<double> rows(p.seqlen_q);
  for (std::int64_t i = 0; i < p.seqlen_q; ++i) rows[i] = out[2 * i];
  return rows;
}

void expect_rows_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "row " << i;
}

TEST(ReferenceWindow, SeesTheKeysTheRuleNames) {
  ReferenceProblem p;
  p.seqlen_q = 4;
  p.seqlen_k = 6;  // diagonal of row i at key i + 2
  p.window_left = 1;
  p.window_right = 1;
  std::vector<double> lse;
  // row 0 sees keys 1..3 (values 2..4), row 1 keys 2..4, row 2 keys 3..5, row 3 keys 4..5.
  expect_rows_near(reference_rows(p, &lse), {3.0, 4.0, 5.0, 5.5});
  EXPECT_NEAR(lse[3], std::log(2.0), 1e-12);
  p.causal = true;  // causal makes the right bound 0 whatever window_right says
  p.window_right = -1;
  // row 0 sees keys 1..2, row 1 keys 2..3, row 2 keys 3..4, row 3 keys 4..5.
  expect_rows_near(reference_rows(p, &lse), {2.5, 3.5, 4.5, 5.5});
  p.causal = false;
  p.seqlen_q = 6;
  p.seqlen_k = 3;  // diagonal of row i at key i - 3: rows 0..1 see nothing with a right bound of 1
  p.window_left = 0;
  p.window_right = 1;
  const std::vector<double> rows = reference_rows(p, &lse);
  expect_rows_near(rows, {0.0, 0.0, 1.0, 1.5, 2.5, 3.0});
  EXPECT_TRUE(std::isinf(lse[0]) && lse[0] < 0);
  EXPECT_TRUE(std::isinf(lse[1]) && lse[1] < 0);
}

TEST(ReferenceAlibi, WeighsKeysByTheirDistanceFromTheDiagonal) {
  ReferenceProblem p;
  p.seqlen_q = 1;
  p.seqlen_k = 3;  // row 0's diagonal at key 2: distances 2, 1, 0
  const double slope = 0.5;
  p.alibi_slopes = &slope;
  std::vector<double> lse;
  const double w[3] = {std::exp(-1.0), std::exp(-0.5), 1.0};
  const double expected = (1 * w[0] + 2 * w[1] + 3 * w[2]) / (w[0] + w[1] + w[2]);
  EXPECT_NEAR(reference_rows(p, &lse)[0], expected, 1e-12);
  EXPECT_NEAR(lse[0], std::log(w[0] + w[1] + w[2]), 1e-12);  // scores are 0 - slope * distance
}

TEST(ReferenceSoftcap, CapsTheScoresWithTanh) {
  // One query, two keys with scores 4 and 0 (scale 1): capped at 2, the first becomes 2 tanh(2).
  ReferenceProblem p;
  p.batch = p.heads_q = p.heads_kv = 1;
  p.seqlen_q = 1;
  p.seqlen_k = 2;
  p.head_dim = 1;
  p.softmax_scale = 1.0;
  p.softcap = 2.0;
  const double q[1] = {2.0}, k[2] = {2.0, 0.0}, v[2] = {1.0, 0.0};
  double out[1], lse[1];
  ASSERT_TRUE(reference_forward(p, q, k, v, out, lse, 1).ok());
  const double s = 2.0 * std::tanh(2.0);
  EXPECT_NEAR(out[0], std::exp(s) / (std::exp(s) + 1.0), 1e-12);
  EXPECT_NEAR(lse[0], std::log(std::exp(s) + 1.0), 1e-12);
  // The gradient through tanh: d out / d q = softmax'(s) * d s / d q, with d s / d q = k (1 - tanh²).
  double dq[1], dk[2], dv[2];
  const double dout[1] = {1.0};
  ASSERT_TRUE(reference_backward(p, q, k, v, dout, dq, dk, dv, 1).ok());
  const double p0 = std::exp(s) / (std::exp(s) + 1.0);
  const double t = std::tanh(2.0);
  EXPECT_NEAR(dq[0], p0 * (1.0 - p0) * (1.0 - t * t) * 2.0, 1e-12);
}

// ---- the window's block bounds ----

// KeyRange's per-row and per-key bounds against the rule itself, for windows around every
// alignment of Sq against Sk; and the CPU paths' block loops cover every visible key.
TEST(KeyRangeWindow, BoundsMatchTheRuleElementByElement) {
  const auto sees = [](std::int64_t sq, std::int64_t sk, std::int64_t left, std::int64_t right, std::int64_t i,
                       std::int64_t j) {
    const std::int64_t offset = j - (i + sk - sq);
    return (right < 0 || offset <= right) && (left < 0 || offset >= -left);
  };
  int checked = 0;
  for (const auto& [sq, sk] : {std::pair{70, 70}, std::pair{33, 150}, std::pair{150, 33}, std::pair{1, 200}}) {
    for (std::int64_t left : {-1, 0, 1, 17, 64, 100}) {
      for (std::int64_t right : {-1, 0, 3, 64}) {
        detail::AttentionProblem p;
        p.seqlen_q = sq;
        p.seqlen_k = sk;
        p.window_left = left;
        p.window_right = right;
        const cpu::KeyRange range(p);
        for (std::int64_t i = 0; i < sq; ++i) {
          std::int64_t begin = sk, end = 0;
          for (std::int64_t j = 0; j < sk; ++j) {
            if (sees(sq, sk, left, right, i, j)) {
              begin = std::min(begin, j);
              end = j + 1;
            }
          }
          if (end == 0) {
            EXPECT_TRUE(range.sees_none(i)) << sq << "x" << sk << " (" << left << ", " << right << ") row " << i;
          } else {
            EXPECT_EQ(range.key_begin(i), begin) << sq << "x" << sk << " (" << left << ", " << right << ") row " << i;
            EXPECT_EQ(range.key_end(i), end) << sq << "x" << sk << " (" << left << ", " << right << ") row " << i;
          }
          ++checked;
        }
        for (std::int64_t j = 0; j < sk; ++j) {
          std::int64_t first = sq, last = -1;
          for (std::int64_t i = 0; i < sq; ++i) {
            if (sees(sq, sk, left, right, i, j)) {
              first = std::min(first, i);
              last = i;
            }
          }
          if (last < 0) continue;
          EXPECT_LE(range.first_row(j), first) << "key " << j;
          EXPECT_GE(range.row_end(j), last + 1) << "key " << j;
          EXPECT_EQ(range.first_row(j), first) << "key " << j;
          EXPECT_EQ(range.row_end(j), last + 1) << "key " << j;
        }
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

// A 64-key window over 4096 keys: each 64-row query block touches at most 3 of the 64 key blocks
// (64-row blocks, as flash_tile.h's kBlockM and kBlockN).
TEST(KeyRangeWindow, BlocksOutsideTheWindowAreSkipped) {
  constexpr std::int64_t kBlock = 64;
  detail::AttentionProblem p;
  p.seqlen_q = p.seqlen_k = 4096;
  p.window_left = 64;
  p.causal = true;
  const cpu::KeyRange range(p);
  for (std::int64_t m0 = 0; m0 < p.seqlen_q; m0 += kBlock) {
    const std::int64_t first = range.key_begin(m0) / kBlock;
    const std::int64_t end = (range.key_end(m0 + kBlock - 1) + kBlock - 1) / kBlock;
    EXPECT_LE(end - first, 3) << "query block at " << m0;
  }
}

// ---- validation ----

::testing::AssertionResult rejected(const Status& status, const std::string& argument, const std::string& what) {
  if (status.code() != StatusCode::kInvalidArgument) {
    return ::testing::AssertionFailure() << "expected kInvalidArgument, got " << static_cast<int>(status.code())
                                         << " (" << status.message() << ")";
  }
  for (const std::string& part : {argument, what}) {
    if (status.message().find(part) == std::string::npos) {
      return ::testing::AssertionFailure() << "message \"" << status.message() << "\" lacks \"" << part << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(ScoreOptionsValidation, BadValuesAreRejectedNamingTheArgumentAndNothingIsWritten) {
  const AttentionShape shape = {2, 5, 7, 4, 2, 16, false};
  std::vector<float> slopes(8, 0.1f);
  struct Bad {
    const char* what;
    std::function<void(std::int64_t*, std::int64_t*, float*, TensorView*)> spoil;
    const char* argument;
    const char* message;
  };
  const std::vector<Bad> cases = {
      {"window left -2", [](auto* l, auto*, auto*, auto*) { *l = -2; }, "window_size", "-1 (unbounded) or at least 0"},
      {"window right -7", [](auto*, auto* r, auto*, auto*) { *r = -7; }, "window_size", "got -7"},
      {"softcap NaN", [](auto*, auto*, float* s, auto*) { *s = std::numeric_limits<float>::quiet_NaN(); }, "softcap",
       "finite number >= 0"},
      {"softcap negative", [](auto*, auto*, float* s, auto*) { *s = -1.0f; }, "softcap", "finite number >= 0"},
      {"softcap inf", [](auto*, auto*, float* s, auto*) { *s = std::numeric_limits<float>::infinity(); }, "softcap",
       "finite"},
      {"slopes wrong length",
       [&](auto*, auto*, auto*, TensorView* a) { *a = make_view(slopes.data(), DType::kFloat32, Device::kCPU, {3}); },
       "alibi_slopes", "expected shape (4) or (2, 4)"},
      {"slopes wrong batch",
       [&](auto*, auto*, auto*, TensorView* a) {
         *a = make_view(slopes.data(), DType::kFloat32, Device::kCPU, {1, 4});
       },
       "alibi_slopes", "(batch, heads_q)"},
      {"slopes rank 3",
       [&](auto*, auto*, auto*, TensorView* a) {
         *a = make_view(slopes.data(), DType::kFloat32, Device::kCPU, {2, 2, 2});
       },
       "alibi_slopes", "rank 3"},
      {"slopes fp16",
       [&](auto*, auto*, auto*, TensorView* a) { *a = make_view(slopes.data(), DType::kFloat16, Device::kCPU, {4}); },
       "alibi_slopes", "expected dtype float32"},
      {"slopes on the GPU",
       [&](auto*, auto*, auto*, TensorView* a) { *a = make_view(slopes.data(), DType::kFloat32, Device::kCUDA, {4}); },
       "alibi_slopes", "expected a cpu tensor"},
  };
  for (const Bad& c : cases) {
    AttentionTensors t(shape, DType::kBFloat16, Layout::kContiguous, 3);
    ForwardParams fwd = t.forward_params(Backend::kCpu);
    c.spoil(&fwd.window_left, &fwd.window_right, &fwd.softcap, &fwd.alibi_slopes);
    EXPECT_TRUE(rejected(forward(fwd), c.argument, c.message)) << c.what;
    EXPECT_TRUE(t.out.all_poisoned() && t.lse.all_poisoned()) << c.what << ": an output was written";
    BackwardParams bwd = t.backward_params(Backend::kCpu);
    c.spoil(&bwd.window_left, &bwd.window_right, &bwd.softcap, &bwd.alibi_slopes);
    EXPECT_TRUE(rejected(backward(bwd), c.argument, c.message)) << c.what;
    EXPECT_TRUE(t.dq.all_poisoned() && t.dk.all_poisoned() && t.dv.all_poisoned()) << c.what;
  }
}

// Normalisation: causal sets window_right to 0; bounds that exclude no key become -1; (-1, 0) is causal.
TEST(ScoreOptionsValidation, WindowsAreNormalised) {
  AttentionTensors t({1, 10, 20, 2, 2, 16, false}, DType::kBFloat16, Layout::kContiguous, 4);
  ForwardParams params = t.forward_params(Backend::kCpu);
  detail::AttentionProblem p;
  params.window_left = 20;
  params.window_right = 10;
  ASSERT_TRUE(detail::validate_forward(params, &p).ok());
  EXPECT_EQ(p.window_left, -1);
  EXPECT_EQ(p.window_right, -1);
  EXPECT_FALSE(p.has_window());
  params.window_left = 19;
  params.window_right = 9;
  ASSERT_TRUE(detail::validate_forward(params, &p).ok());
  EXPECT_EQ(p.window_left, 19);
  EXPECT_EQ(p.window_right, 9);
  params.window_left = -1;
  params.window_right = 0;
  ASSERT_TRUE(detail::validate_forward(params, &p).ok());
  EXPECT_TRUE(p.causal);
  EXPECT_FALSE(p.has_window());
  params.causal = true;
  params.window_left = 3;
  params.window_right = 5;
  ASSERT_TRUE(detail::validate_forward(params, &p).ok());
  EXPECT_EQ(p.window_right, 0);
  EXPECT_TRUE(p.has_window());
}

}  // namespace
}  // namespace flashcore::testing
