// NaN and infinities in q, k or v: the CPU flash backend must give what the plain float64 formula
// gives (attention.h, "Non-finite inputs"): the same NaN and infinities in out, LSE and the
// gradients, at the same places, and the usual accuracy elsewhere. Each case also states the
// expected pattern by hand, so a reference that went wrong the same way would not pass either.
//
// Inputs are N(0, 1) on short rows, so no probability underflows: where one does, 0 * inf can turn
// an infinity the float64 formula keeps into a NaN in float32, and the two are not compared there.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/reference_problem.h"
#include "flashcore/accuracy.h"
#include "api/problem.h"
#include "common/attention_tensors.h"
#include "cpu/reference.h"
#include "flashcore/attention.h"

namespace flashcore::testing {
namespace {

using namespace flashcore::accuracy;  // the accuracy rule and baseline, shared with `flashcore fuzz`

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The element index of (b, row, head, d) in a (batch, seqlen, heads, head_dim) tensor.
std::int64_t at(const HostTensor& t, std::int64_t b, std::int64_t row, std::int64_t head, std::int64_t d) {
  const auto& s = t.shape();
  return ((b * s[1] + row) * s[2] + head) * s[3] + d;
}
std::int64_t lse_index(const AttentionShape& s, std::int64_t b, std::int64_t h, std::int64_t row) {
  return (b * s.heads_q + h) * s.seqlen_q + row;
}

// The flash backend's forward and backward (the backward on the forward's own out and LSE), both
// compared with the float64 reference under flashcore/accuracy.h's rule, which demands the same non-finite
// values where the reference has them.
void expect_matches_reference(AttentionTensors& t, const std::string& what) {
  SCOPED_TRACE(what + " (" + shape_name(t.shape) + ", " + dtype_name(t.dtype) + ")");
  const ForwardParams fwd = t.forward_params(Backend::kCpu);
  ASSERT_TRUE(forward(fwd).ok());
  const BackwardParams bwd = t.backward_params(Backend::kCpu);
  ASSERT_TRUE(backward(bwd).ok());

  detail::AttentionProblem problem;
  ASSERT_TRUE(detail::validate_backward(bwd, &problem).ok());
  std::vector<double> ref_out, ref_lse, ref_dq, ref_dk, ref_dv;
  ASSERT_TRUE(cpu::reference_forward_f64(fwd, problem, &ref_out, &ref_lse).ok());
  ASSERT_TRUE(cpu::reference_backward_f64(bwd, problem, &ref_dq, &ref_dk, &ref_dv).ok());
  const BaselineForward base_fwd = baseline_forward(reference_problem(problem), problem.dtype,
                                                    t.q.values(), t.k.values(), t.v.values());
  const BaselineBackward base_bwd =
      baseline_backward(reference_problem(problem), problem.dtype,
                        t.q.values(), t.k.values(), t.v.values(), t.dout.values());

  const Comparison checks[] = {
      compare_to_reference("out", t.dtype, 2.0, t.out.values(), base_fwd.out, ref_out),
      compare_to_reference("lse", DType::kFloat32, 2.0, t.lse.values(), base_fwd.lse, ref_lse),
      compare_to_reference("dq", t.dtype, 3.0, t.dq.values(), base_bwd.dq, ref_dq),
      compare_to_reference("dk", t.dtype, 3.0, t.dk.values(), base_bwd.dk, ref_dk),
      compare_to_reference("dv", t.dtype, 3.0, t.dv.values(), base_bwd.dv, ref_dv),
  };
  for (const Comparison& c : checks) EXPECT_TRUE(c.ok) << c.message;
}

// What row `row` of head `head` (batch 0) holds, column by column: all NaN, all finite, ...
bool row_is(const HostTensor& t, std::int64_t row, std::int64_t head, bool (*pred)(double)) {
  for (std::int64_t d = 0; d < t.shape()[3]; ++d) {
    if (!pred(t.get(at(t, 0, row, head, d)))) return false;
  }
  return true;
}
bool is_nan(double x) { return std::isnan(x); }
bool is_finite(double x) { return std::isfinite(x); }
bool is_zero(double x) { return x == 0.0; }

AttentionShape shape_of(std::int64_t seqlen_q, std::int64_t seqlen_k, std::int64_t heads_q, std::int64_t heads_kv,
                        std::int64_t head_dim, bool causal) {
  return {1, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal};
}

class NonFinite : public ::testing::TestWithParam<DType> {};

// One NaN in q: its row's output and LSE are NaN, the other rows untouched; the NaN row's
// gradients reach dq of that row and dk, dv of the keys it sees (here every key), and nothing else
// (another head stays finite).
TEST_P(NonFinite, NanInQPoisonsItsRowAndTheKeysItSees) {
  AttentionTensors t(shape_of(70, 90, 2, 2, 32, false), GetParam(), Layout::kPadded, 11);
  t.q.set(at(t.q, 0, 5, 0, 3), kNaN);
  expect_matches_reference(t, "NaN in q");
  for (std::int64_t i = 0; i < 70; ++i) {
    EXPECT_EQ(row_is(t.out, i, 0, is_nan), i == 5) << "out row " << i;
    EXPECT_EQ(std::isnan(t.lse.get(lse_index(t.shape, 0, 0, i))), i == 5) << "lse row " << i;
    EXPECT_TRUE(row_is(t.out, i, 1, is_finite)) << "head 1, row " << i;
    EXPECT_EQ(row_is(t.dq, i, 0, is_nan), i == 5) << "dq row " << i;
  }
  for (std::int64_t j = 0; j < 90; ++j) {
    EXPECT_TRUE(row_is(t.dk, j, 0, is_nan)) << "dk row " << j;
    EXPECT_TRUE(row_is(t.dv, j, 0, is_nan)) << "dv row " << j;
    EXPECT_TRUE(row_is(t.dk, j, 1, is_finite)) << "dk head 1, row " << j;
  }
}

// Causal: the NaN row sees keys 0..5 only, so the keys past them (masked for it, in the same tiles)
// keep finite dk and dv: a masked zero must not multiply the NaN.
TEST_P(NonFinite, NanInQCausalSparesTheKeysItDoesNotSee) {
  AttentionTensors t(shape_of(150, 150, 1, 1, 32, true), GetParam(), Layout::kContiguous, 12);
  t.q.set(at(t.q, 0, 5, 0, 0), kNaN);
  expect_matches_reference(t, "NaN in q, causal");
  for (std::int64_t j = 0; j < 150; ++j) {
    EXPECT_EQ(row_is(t.dk, j, 0, is_nan), j <= 5) << "dk row " << j;
    EXPECT_EQ(row_is(t.dv, j, 0, is_nan), j <= 5) << "dv row " << j;
  }
}

// A NaN in key j reaches exactly the rows that see j (causal: rows >= j).
TEST_P(NonFinite, NanInKReachesTheRowsThatSeeIt) {
  AttentionTensors t(shape_of(130, 130, 2, 1, 40, true), GetParam(), Layout::kPadded, 13);
  t.k.set(at(t.k, 0, 70, 0, 7), kNaN);
  expect_matches_reference(t, "NaN in k, causal, GQA");
  for (std::int64_t i = 0; i < 130; ++i) {
    for (std::int64_t h = 0; h < 2; ++h) {
      EXPECT_EQ(row_is(t.out, i, h, is_nan), i >= 70) << "out row " << i << " head " << h;
      EXPECT_EQ(row_is(t.dq, i, h, is_finite), i < 70) << "dq row " << i << " head " << h;
    }
  }
}

// A NaN in v_j[d] reaches column d of the rows that see j; the LSE does not depend on v.
TEST_P(NonFinite, NanInVReachesOneColumnOfTheRowsThatSeeIt) {
  AttentionTensors t(shape_of(100, 100, 1, 1, 32, true), GetParam(), Layout::kContiguous, 14);
  t.v.set(at(t.v, 0, 40, 0, 9), kNaN);
  expect_matches_reference(t, "NaN in v, causal");
  for (std::int64_t i = 0; i < 100; ++i) {
    for (std::int64_t d = 0; d < 32; ++d) {
      EXPECT_EQ(std::isnan(t.out.get(at(t.out, 0, i, 0, d))), i >= 40 && d == 9) << "out " << i << "," << d;
    }
    EXPECT_TRUE(std::isfinite(t.lse.get(i))) << "lse row " << i;
  }
}

// +inf and -inf in v: the rows that see the key get that infinity in that column (their weights
// are positive); rows that do not see it (causal, same tile) stay finite.
TEST_P(NonFinite, InfinityInVGivesThatInfinityWhereTheKeyIsSeen) {
  for (const double inf : {kInf, -kInf}) {
    AttentionTensors t(shape_of(90, 90, 1, 1, 32, true), GetParam(), Layout::kPadded, 15);
    t.v.set(at(t.v, 0, 30, 0, 4), inf);
    expect_matches_reference(t, inf > 0 ? "+inf in v" : "-inf in v");
    for (std::int64_t i = 0; i < 90; ++i) {
      const double o = t.out.get(at(t.out, 0, i, 0, 4));
      if (i >= 30) {
        EXPECT_EQ(o, inf) << "out row " << i;
      } else {
        EXPECT_TRUE(std::isfinite(o)) << "out row " << i;
      }
    }
  }
}

// +inf in q: some score of the row is +inf, and exp(inf - inf) makes the whole row NaN.
TEST_P(NonFinite, InfinityInQMakesItsRowNan) {
  AttentionTensors t(shape_of(20, 33, 1, 1, 32, false), GetParam(), Layout::kContiguous, 16);
  t.q.set(at(t.q, 0, 3, 0, 0), kInf);
  expect_matches_reference(t, "+inf in q");
  for (std::int64_t i = 0; i < 20; ++i) EXPECT_EQ(row_is(t.out, i, 0, is_nan), i == 3) << "out row " << i;
  EXPECT_TRUE(std::isnan(t.lse.get(3)));
}

// +inf in k_j[d]: a row with q_i[d] > 0 scores +inf (NaN row), one with q_i[d] < 0 scores -inf and
// just gives key j probability 0. Its dq is still NaN in column d: the formula's dS_ij k_j is 0 * inf.
TEST_P(NonFinite, InfinityInKSplitsRowsBySign) {
  AttentionTensors t(shape_of(40, 50, 1, 1, 32, false), GetParam(), Layout::kContiguous, 17);
  t.k.set(at(t.k, 0, 10, 0, 2), kInf);
  expect_matches_reference(t, "+inf in k");
  int nan_rows = 0, finite_rows = 0;
  for (std::int64_t i = 0; i < 40; ++i) {
    const bool positive = t.q.get(at(t.q, 0, i, 0, 2)) > 0;
    EXPECT_EQ(row_is(t.out, i, 0, is_nan), positive) << "out row " << i;
    EXPECT_EQ(row_is(t.out, i, 0, is_finite), !positive) << "out row " << i;
    if (!positive) {
      EXPECT_TRUE(std::isnan(t.dq.get(at(t.dq, 0, i, 0, 2)))) << "dq row " << i;
    }
    (positive ? nan_rows : finite_rows) += 1;
  }
  EXPECT_GT(nan_rows, 0);
  EXPECT_GT(finite_rows, 0);
}

// A row whose every visible score is -inf: the formula's softmax is 0 / 0, NaN (not the 0 of a
// row that sees no key).
TEST_P(NonFinite, EveryScoreMinusInfinityIsNan) {
  AttentionTensors t(shape_of(3, 1, 1, 1, 8, false), GetParam(), Layout::kContiguous, 18);
  t.k.set(at(t.k, 0, 0, 0, 0), -1.0);
  t.q.set(at(t.q, 0, 1, 0, 0), kInf);  // score of row 1: -inf
  expect_matches_reference(t, "every score -inf");
  EXPECT_TRUE(row_is(t.out, 1, 0, is_nan));
  EXPECT_TRUE(std::isnan(t.lse.get(1)));
  EXPECT_TRUE(row_is(t.out, 0, 0, is_finite));
}

// Causal with seqlen_q > seqlen_k: rows that see no key keep output 0 and LSE -inf, and zero
// gradients, whatever NaN or infinity the keys they do not see hold.
TEST_P(NonFinite, RowsThatSeeNoKeyStayZero) {
  AttentionTensors t(shape_of(100, 40, 2, 1, 32, true), GetParam(), Layout::kPadded, 19);
  t.k.set(at(t.k, 0, 39, 0, 1), kNaN);
  t.v.set(at(t.v, 0, 0, 0, 5), kInf);
  t.q.set(at(t.q, 0, 10, 1, 6), kNaN);  // a row that sees nothing: its NaN goes nowhere
  expect_matches_reference(t, "rows without keys");
  for (std::int64_t i = 0; i < 60; ++i) {  // rows 0..59 see no key
    for (std::int64_t h = 0; h < 2; ++h) {
      EXPECT_TRUE(row_is(t.out, i, h, is_zero)) << "out row " << i;
      EXPECT_EQ(t.lse.get(lse_index(t.shape, 0, h, i)), -kInf) << "lse row " << i;
      EXPECT_TRUE(row_is(t.dq, i, h, is_zero)) << "dq row " << i;
    }
  }
  for (std::int64_t i = 60; i < 99; ++i) {  // they see key 0, whose v is +inf in column 5
    for (std::int64_t d = 0; d < 32; ++d) {
      const double o = t.out.get(at(t.out, 0, i, 0, d));
      EXPECT_TRUE(d == 5 ? o == kInf : std::isfinite(o)) << "out row " << i << " column " << d;
    }
  }
  EXPECT_TRUE(row_is(t.out, 99, 0, is_nan));  // the last row sees key 39, the NaN one
  for (std::int64_t j = 0; j < 40; ++j) EXPECT_TRUE(row_is(t.dk, j, 0, is_nan)) << "dk row " << j;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NonFinite, ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32),
                         [](const ::testing::TestParamInfo<DType>& param) {
                           return std::string(param.param == DType::kFloat16    ? "fp16"
                                              : param.param == DType::kBFloat16 ? "bf16"
                                                                                : "fp32");
                         });

}  // namespace
}  // namespace flashcore::testing
