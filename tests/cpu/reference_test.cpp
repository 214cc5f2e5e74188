// The float64 reference checked on its own: hand-worked cases that pin down the semantics
// (bottom-right causal alignment, GQA head mapping, rows that see no key), its backward against
// finite differences of its forward, and the kCpuReference backend's rounding.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "api/problem.h"
#include "common/attention_tensors.h"
#include "flashcore/accuracy.h"
#include "cpu/reference.h"
#include "flashcore/attention.h"

namespace flashcore::testing {
namespace {

using namespace flashcore::accuracy;  // the accuracy rule and baseline, shared with `flashcore fuzz`

detail::AttentionProblem make_problem(std::int64_t seqlen_q, std::int64_t seqlen_k, std::int64_t heads_q,
                                      std::int64_t heads_kv, std::int64_t head_dim, bool causal) {
  detail::AttentionProblem p;
  p.batch = 1;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.head_dim = head_dim;
  p.causal = causal;
  p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  p.backend = Backend::kCpuReference;
  return p;
}

// q = 0 makes every visible key equally likely, so out is the mean of the visible values: which
// keys a row sees can be read straight off the output. v_j = j + 1 in every dimension.
TEST(Reference, CausalIsAlignedBottomRight) {
  const std::int64_t head_dim = 8;
  struct Case {
    std::int64_t seqlen_q, seqlen_k;
    std::vector<double> expected_out;  // per row: mean of (j + 1) over the keys it sees, or 0
  };
  const std::vector<Case> cases = {
      {2, 3, {1.5, 2.0}},            // Sq < Sk: row 0 sees keys 0..1, row 1 sees 0..2
      {3, 3, {1.0, 1.5, 2.0}},       // square: the usual lower triangle
      {4, 2, {0.0, 0.0, 1.0, 1.5}},  // Sq > Sk: rows 0, 1 see nothing, row 2 sees key 0
  };
  for (const Case& c : cases) {
    const detail::AttentionProblem p = make_problem(c.seqlen_q, c.seqlen_k, 1, 1, head_dim, true);
    std::vector<double> q(static_cast<size_t>(c.seqlen_q * head_dim), 0.0);
    std::vector<double> k(static_cast<size_t>(c.seqlen_k * head_dim), 0.5);
    std::vector<double> v(static_cast<size_t>(c.seqlen_k * head_dim));
    for (std::int64_t j = 0; j < c.seqlen_k; ++j)
      for (std::int64_t d = 0; d < head_dim; ++d) v[static_cast<size_t>(j * head_dim + d)] = static_cast<double>(j + 1);
    std::vector<double> out(q.size()), lse(static_cast<size_t>(c.seqlen_q));
    cpu::reference_attention_forward(p, q.data(), k.data(), v.data(), out.data(), lse.data(), 1);
    for (std::int64_t i = 0; i < c.seqlen_q; ++i) {
      const double want = c.expected_out[static_cast<size_t>(i)];
      EXPECT_DOUBLE_EQ(out[static_cast<size_t>(i * head_dim)], want)
          << "Sq " << c.seqlen_q << " Sk " << c.seqlen_k << " row " << i;
      const std::int64_t visible = std::max<std::int64_t>(0, std::min(c.seqlen_k, i + c.seqlen_k - c.seqlen_q + 1));
      const double want_lse =
          visible == 0 ? -std::numeric_limits<double>::infinity() : std::log(static_cast<double>(visible));
      EXPECT_DOUBLE_EQ(lse[static_cast<size_t>(i)], want_lse) << "row " << i;
    }
  }
}

// Query head h reads kv head h / (heads_q / heads_kv): with one key per kv head, out is that key's v.
TEST(Reference, GroupedQueryHeadsReadTheirGroupsKvHead) {
  const std::int64_t heads_q = 6, heads_kv = 3, head_dim = 8;
  const detail::AttentionProblem p = make_problem(1, 1, heads_q, heads_kv, head_dim, false);
  std::vector<double> q(static_cast<size_t>(heads_q * head_dim), 0.25);
  std::vector<double> k(static_cast<size_t>(heads_kv * head_dim), 0.5);
  std::vector<double> v(static_cast<size_t>(heads_kv * head_dim));
  for (std::int64_t h = 0; h < heads_kv; ++h)
    for (std::int64_t d = 0; d < head_dim; ++d) v[static_cast<size_t>(h * head_dim + d)] = 10.0 * h + d;
  std::vector<double> out(q.size()), lse(static_cast<size_t>(heads_q));
  cpu::reference_attention_forward(p, q.data(), k.data(), v.data(), out.data(), lse.data(), 1);
  for (std::int64_t h = 0; h < heads_q; ++h)
    for (std::int64_t d = 0; d < head_dim; ++d)
      EXPECT_EQ(out[static_cast<size_t>(h * head_dim + d)], 10.0 * (h / 2) + d) << "head " << h << " dim " << d;
}

// L(q, k, v) = sum(out * dout); its gradient by central differences in float64 must match the
// reference backward's to ~1e-7 relative. GQA 2:1 and causal with Sq > Sk (a row that sees no key,
// whose gradients must be exactly 0) are both in the case.
TEST(Reference, BackwardMatchesFiniteDifferencesOfForward) {
  for (const bool causal : {false, true}) {
    const detail::AttentionProblem p = make_problem(5, 3, 2, 1, 8, causal);
    std::mt19937_64 rng(42);
    std::normal_distribution<double> normal;
    auto random = [&](std::int64_t n) {
      std::vector<double> x(static_cast<size_t>(n));
      for (double& e : x) e = normal(rng);
      return x;
    };
    std::vector<double> q = random(p.seqlen_q * p.heads_q * p.head_dim);
    std::vector<double> k = random(p.seqlen_k * p.heads_kv * p.head_dim);
    std::vector<double> v = random(p.seqlen_k * p.heads_kv * p.head_dim);
    const std::vector<double> dout = random(p.seqlen_q * p.heads_q * p.head_dim);

    auto loss = [&]() {
      std::vector<double> out(q.size()), lse(static_cast<size_t>(p.heads_q * p.seqlen_q));
      cpu::reference_attention_forward(p, q.data(), k.data(), v.data(), out.data(), lse.data(), 1);
      double l = 0.0;
      for (size_t e = 0; e < out.size(); ++e) l += out[e] * dout[e];
      return l;
    };
    std::vector<double> dq(q.size()), dk(k.size()), dv(v.size());
    cpu::reference_attention_backward(p, q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(), dv.data(), 1);

    const double step = 1e-6;
    auto check = [&](const char* name, std::vector<double>& x, const std::vector<double>& grad) {
      for (size_t e = 0; e < x.size(); ++e) {
        const double saved = x[e];
        x[e] = saved + step;
        const double up = loss();
        x[e] = saved - step;
        const double down = loss();
        x[e] = saved;
        const double numeric = (up - down) / (2 * step);
        EXPECT_NEAR(grad[e], numeric, 1e-7 * (1.0 + std::fabs(numeric))) << name << "[" << e << "] causal " << causal;
      }
    };
    check("dq", q, dq);
    check("dk", k, dk);
    check("dv", v, dv);

    if (causal) {  // row 0 (and 1) of Sq=5, Sk=3 see no key: their dq is exactly 0
      for (std::int64_t e = 0; e < 2 * p.heads_q * p.head_dim; ++e) EXPECT_EQ(dq[static_cast<size_t>(e)], 0.0);
    }
  }
}

// Whether every `got` value is a nearest dtype number to its `exact` value (either one at a tie).
::testing::AssertionResult rounded_from(const char* name, DType dtype, const std::vector<double>& got,
                                        const std::vector<double>& exact) {
  if (got.size() != exact.size()) return ::testing::AssertionFailure() << name << ": size mismatch";
  for (size_t e = 0; e < got.size(); ++e) {
    if (got[e] == exact[e]) continue;  // exact, or the same infinity
    if (!(std::fabs(got[e] - exact[e]) <= 0.5 * ulp_at(dtype, exact[e]))) {
      return ::testing::AssertionFailure()
             << name << "[" << e << "] = " << got[e] << " is not " << exact[e] << " rounded to " << dtype_name(dtype);
    }
  }
  return ::testing::AssertionSuccess();
}

// accuracy.h's row-sum allowance on a single key (P = 1, exact dq = 0): with the exact O given it is
// the fp32 summation term alone, tiny; an error d in one element of the O given adds
// scale * |dO_c d| * max|K| to dq's allowance and scale * |dO_c d| * max|Q| to dk's.
TEST(Reference, RowSumAllowanceFollowsTheOutputTheBackwardIsGiven) {
  ReferenceProblem p;
  p.batch = p.seqlen_q = p.seqlen_k = p.heads_q = p.heads_kv = 1;
  p.head_dim = 8;
  p.softmax_scale = 0.25;
  std::vector<double> q(8), k(8), v(8), dout(8);
  for (int c = 0; c < 8; ++c) {
    q[c] = 0.5 - 0.125 * c;
    k[c] = 0.25 * (c % 3) - 0.5;
    v[c] = 1.0 - 0.25 * c;
    dout[c] = 0.125 * (c + 1);
  }
  const RowSumAllowance exact = row_sum_allowance(p, DType::kBFloat16, q, k, v, /*out=*/v, dout, 1);
  EXPECT_GT(exact.dq, 0.0);
  EXPECT_LT(exact.dq, 1e-6);
  std::vector<double> out = v;
  out[3] += 0.01;
  const RowSumAllowance off = row_sum_allowance(p, DType::kBFloat16, q, k, v, out, dout, 1);
  const double added = 0.25 * dout[3] * 0.01;  // scale * |dO_3 * 0.01|
  EXPECT_NEAR(off.dq - exact.dq, added * 0.5, added * 0.5 * 0.02);   // max|K| = 0.5
  EXPECT_NEAR(off.dk - exact.dk, added * 0.5, added * 0.5 * 0.02);   // max|Q| = 0.5
}

// Backend::kCpuReference writes the float64 results rounded once to the output dtype.
TEST(Reference, BackendRoundsTheFloat64Results) {
  for (const DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    AttentionTensors t({2, 37, 53, 4, 2, 40, true}, dtype, Layout::kPadded, 7);
    const ForwardParams fwd = t.forward_params(Backend::kCpuReference);
    Status status = forward(fwd);
    ASSERT_TRUE(status.ok()) << status.message();
    detail::AttentionProblem problem;
    ASSERT_TRUE(detail::validate_forward(fwd, &problem).ok());
    std::vector<double> out, lse;
    ASSERT_TRUE(cpu::reference_forward_f64(fwd, problem, &out, &lse).ok());
    EXPECT_TRUE(rounded_from("out", dtype, t.out.values(), out));
    EXPECT_TRUE(rounded_from("lse", DType::kFloat32, t.lse.values(), lse));
    EXPECT_TRUE(t.out.outside_view_untouched());

    const BackwardParams bwd = t.backward_params(Backend::kCpuReference);
    status = backward(bwd);
    ASSERT_TRUE(status.ok()) << status.message();
    std::vector<double> dq, dk, dv;
    ASSERT_TRUE(cpu::reference_backward_f64(bwd, problem, &dq, &dk, &dv).ok());
    EXPECT_TRUE(rounded_from("dq", dtype, t.dq.values(), dq));
    EXPECT_TRUE(rounded_from("dk", dtype, t.dk.values(), dk));
    EXPECT_TRUE(rounded_from("dv", dtype, t.dv.values(), dv));
  }
}

}  // namespace
}  // namespace flashcore::testing
