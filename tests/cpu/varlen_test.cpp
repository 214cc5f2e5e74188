// Variable-length batches on the CPU backend: packed sequences of different lengths (empty ones
// too), alone and with causal, GQA, the window, softcap and ALiBi, forward (out and LSE) and
// backward against the float64 reference run sequence by sequence, under FlashAttention's rule;
// and the validation of cu_seqlens / max_seqlen.
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/host_tensor.h"
#include "flashcore/accuracy.h"
#include "flashcore/attention.h"
#include "flashcore/reference.h"

namespace flashcore::testing {
namespace {

using namespace flashcore::accuracy;

struct VarlenCase {
  const char* name;
  std::vector<std::int32_t> lens_q, lens_k;
  std::int64_t heads_q, heads_kv, head_dim;
  bool causal = false;
  std::int64_t window_left = -1, window_right = -1;
  float softcap = 0.0f;
  bool alibi = false;  // (batch, heads_q) slopes
};

void PrintTo(const VarlenCase& c, std::ostream* os) { *os << c.name; }

std::vector<std::int32_t> offsets_of(const std::vector<std::int32_t>& lens) {
  std::vector<std::int32_t> offsets(lens.size() + 1, 0);
  std::partial_sum(lens.begin(), lens.end(), offsets.begin() + 1);
  return offsets;
}

// Rows [begin, begin + n) of a packed (total, heads, d) value array: a dense (1, n, heads, d) one.
std::vector<double> rows(const std::vector<double>& packed, std::int64_t begin, std::int64_t n, std::int64_t width) {
  return {packed.begin() + begin * width, packed.begin() + (begin + n) * width};
}

void put_rows(std::vector<double>* packed, const std::vector<double>& dense, std::int64_t begin, std::int64_t width) {
  std::copy(dense.begin(), dense.end(), packed->begin() + begin * width);
}

class Varlen : public ::testing::TestWithParam<VarlenCase> {};

TEST_P(Varlen, ForwardAndBackwardMatchThePerSequenceReference) {
  const VarlenCase& c = GetParam();
  const DType dtype = DType::kBFloat16;
  const std::int64_t batch = static_cast<std::int64_t>(c.lens_q.size());
  std::vector<std::int32_t> cu_q = offsets_of(c.lens_q), cu_k = offsets_of(c.lens_k);
  const std::int64_t total_q = cu_q.back(), total_k = cu_k.back(), d = c.head_dim;
  const std::int64_t max_q = *std::max_element(c.lens_q.begin(), c.lens_q.end());
  const std::int64_t max_k = *std::max_element(c.lens_k.begin(), c.lens_k.end());
  std::mt19937_64 rng(std::hash<std::string>{}(c.name));
  HostTensor q(dtype, {total_q, c.heads_q, d}), k(dtype, {total_k, c.heads_kv, d}), v(dtype, {total_k, c.heads_kv, d});
  HostTensor dout(dtype, {total_q, c.heads_q, d}), out(dtype, {total_q, c.heads_q, d});
  HostTensor lse(DType::kFloat32, {c.heads_q, total_q});
  HostTensor dq(dtype, {total_q, c.heads_q, d}), dk(dtype, {total_k, c.heads_kv, d}), dv(dtype, {total_k, c.heads_kv, d});
  for (HostTensor* t : {&q, &k, &v, &dout}) t->fill_normal(rng);
  std::vector<float> slopes(static_cast<size_t>(batch * c.heads_q));
  for (float& s : slopes) s = std::uniform_real_distribution<float>(0.0f, 0.3f)(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));

  ForwardParams fp;
  fp.q = q.view(), fp.k = k.view(), fp.v = v.view(), fp.out = out.view(), fp.lse = lse.view();
  fp.softmax_scale = scale;
  fp.causal = c.causal;
  fp.backend = Backend::kCpu;
  fp.window_left = c.window_left, fp.window_right = c.window_right, fp.softcap = c.softcap;
  if (c.alibi) fp.alibi_slopes = make_view(slopes.data(), DType::kFloat32, Device::kCPU, {batch, c.heads_q});
  fp.cu_seqlens_q = make_view(cu_q.data(), DType::kInt32, Device::kCPU, {batch + 1});
  fp.cu_seqlens_k = make_view(cu_k.data(), DType::kInt32, Device::kCPU, {batch + 1});
  fp.max_seqlen_q = max_q, fp.max_seqlen_k = max_k;
  Status status = forward(fp);
  ASSERT_TRUE(status.ok()) << status.message();
  BackwardParams bp;
  bp.q = fp.q, bp.k = fp.k, bp.v = fp.v, bp.out = fp.out, bp.lse = fp.lse, bp.dout = dout.view();
  bp.dq = dq.view(), bp.dk = dk.view(), bp.dv = dv.view();
  bp.softmax_scale = scale, bp.causal = c.causal, bp.backend = Backend::kCpu;
  bp.window_left = c.window_left, bp.window_right = c.window_right, bp.softcap = c.softcap;
  bp.alibi_slopes = fp.alibi_slopes, bp.cu_seqlens_q = fp.cu_seqlens_q, bp.cu_seqlens_k = fp.cu_seqlens_k;
  bp.max_seqlen_q = max_q, bp.max_seqlen_k = max_k;
  status = backward(bp);
  ASSERT_TRUE(status.ok()) << status.message();

  // The reference and the same-precision baseline, one sequence at a time, packed like the outputs;
  // sequences without keys: out 0, LSE -inf, gradients 0 (rows that see nothing).
  const std::int64_t wq = c.heads_q * d, wk = c.heads_kv * d;
  std::vector<double> ref_out(q.numel(), 0.0), base_out(q.numel(), 0.0), ref_lse(lse.numel(), -INFINITY);
  std::vector<double> base_lse(lse.numel(), -INFINITY);
  std::vector<double> ref_dq(q.numel(), 0.0), ref_dk(k.numel(), 0.0), ref_dv(k.numel(), 0.0);
  std::vector<double> base_dq(q.numel(), 0.0), base_dk(k.numel(), 0.0), base_dv(k.numel(), 0.0);
  const std::vector<double> qv = q.values(), kv = k.values(), vv = v.values(), dov = dout.values();
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t nq = c.lens_q[b], nk = c.lens_k[b];
    if (nq == 0 || nk == 0) continue;
    ReferenceProblem r;
    r.batch = 1, r.seqlen_q = nq, r.seqlen_k = nk, r.heads_q = c.heads_q, r.heads_kv = c.heads_kv, r.head_dim = d;
    r.softmax_scale = scale, r.causal = c.causal, r.window_left = c.window_left, r.window_right = c.window_right;
    r.softcap = c.softcap;
    std::vector<double> seq_slopes(slopes.begin() + b * c.heads_q, slopes.begin() + (b + 1) * c.heads_q);
    if (c.alibi) r.alibi_slopes = seq_slopes.data();
    const auto sq = rows(qv, cu_q[b], nq, wq), sk = rows(kv, cu_k[b], nk, wk), sv = rows(vv, cu_k[b], nk, wk);
    const auto sdo = rows(dov, cu_q[b], nq, wq);
    std::vector<double> o(sq.size()), l(static_cast<size_t>(c.heads_q * nq)), gq(sq.size()), gk(sk.size()), gv(sk.size());
    ASSERT_TRUE(reference_forward(r, sq.data(), sk.data(), sv.data(), o.data(), l.data()).ok());
    ASSERT_TRUE(reference_backward(r, sq.data(), sk.data(), sv.data(), sdo.data(), gq.data(), gk.data(), gv.data()).ok());
    const BaselineForward bf = baseline_forward(r, dtype, sq, sk, sv);
    const BaselineBackward bb = baseline_backward(r, dtype, sq, sk, sv, sdo);
    put_rows(&ref_out, o, cu_q[b], wq), put_rows(&base_out, bf.out, cu_q[b], wq);
    put_rows(&ref_dq, gq, cu_q[b], wq), put_rows(&base_dq, bb.dq, cu_q[b], wq);
    put_rows(&ref_dk, gk, cu_k[b], wk), put_rows(&base_dk, bb.dk, cu_k[b], wk);
    put_rows(&ref_dv, gv, cu_k[b], wk), put_rows(&base_dv, bb.dv, cu_k[b], wk);
    for (std::int64_t h = 0; h < c.heads_q; ++h)
      for (std::int64_t i = 0; i < nq; ++i) {
        ref_lse[h * total_q + cu_q[b] + i] = l[h * nq + i];
        base_lse[h * total_q + cu_q[b] + i] = bf.lse[h * nq + i];
      }
  }
  for (const Comparison& cmp :
       {compare_to_reference("out", dtype, 2.0, out.values(), base_out, ref_out),
        compare_to_reference("lse", DType::kFloat32, 2.0, lse.values(), base_lse, ref_lse),
        compare_to_reference("dq", dtype, 3.0, dq.values(), base_dq, ref_dq),
        compare_to_reference("dk", dtype, 3.0, dk.values(), base_dk, ref_dk),
        compare_to_reference("dv", dtype, 3.0, dv.values(), base_dv, ref_dv)}) {
    EXPECT_TRUE(cmp.ok) << cmp.message;
  }
  const std::vector<double> got_lse = lse.values();
  for (size_t i = 0; i < got_lse.size(); ++i) {
    EXPECT_EQ(std::isinf(got_lse[i]) && got_lse[i] < 0, std::isinf(ref_lse[i]) && ref_lse[i] < 0) << "lse " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cpu, Varlen,
    ::testing::Values(VarlenCase{"plain", {37, 1, 130, 64}, {37, 1, 130, 64}, 2, 2, 64},
                      VarlenCase{"causal_gqa_sq_ne_sk", {20, 90, 3}, {50, 40, 129}, 4, 2, 32, true},
                      VarlenCase{"empty_sequences", {70, 0, 33, 5}, {70, 12, 0, 200}, 2, 1, 64},
                      VarlenCase{"all_options", {60, 129, 17}, {90, 129, 17}, 4, 2, 40, true, 20, -1, 1.5f, true},
                      VarlenCase{"window_both_sides", {100, 65}, {80, 65}, 2, 2, 64, false, 10, 5, 0.0f, false}),
    [](const ::testing::TestParamInfo<VarlenCase>& info) { return std::string(info.param.name); });

// ---- validation ----

struct VarlenArgs {
  HostTensor q{DType::kFloat16, {20, 2, 32}}, out{DType::kFloat16, {20, 2, 32}};
  std::vector<std::int32_t> cu_q{0, 10, 15, 20}, cu_k{0, 10, 15, 20};

  ForwardParams params(std::int64_t max_q = 10, std::int64_t max_k = 10) {
    ForwardParams p;
    p.q = p.k = p.v = q.view();
    p.out = out.view();
    p.cu_seqlens_q = make_view(cu_q.data(), DType::kInt32, Device::kCPU, {static_cast<std::int64_t>(cu_q.size())});
    p.cu_seqlens_k = make_view(cu_k.data(), DType::kInt32, Device::kCPU, {static_cast<std::int64_t>(cu_k.size())});
    p.max_seqlen_q = max_q, p.max_seqlen_k = max_k;
    return p;
  }
};

void expect_rejected(const ForwardParams& p, const std::string& text) {
  const Status status = forward(p);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find(text), std::string::npos) << status.message();
}

TEST(VarlenValidation, BadOffsetsAndBoundsNameTheArgument) {
  VarlenArgs a;
  ASSERT_TRUE(forward(a.params()).ok());
  a.cu_q = {0, 10, 5, 20};
  expect_rejected(a.params(), "cu_seqlens_q: must not decrease");
  a.cu_q = {1, 10, 15, 20};
  expect_rejected(a.params(), "cu_seqlens_q: must start at 0");
  a.cu_q = {0, 10, 15, 19};
  expect_rejected(a.params(), "cu_seqlens_q: must end at q's total_q (20)");
  a.cu_q = {0, 10, 15, 20};
  expect_rejected(a.params(6), "cu_seqlens_q: sequence 0 has length 10, above max_seqlen_q (6)");
  expect_rejected(a.params(0), "max_seqlen_q: must be at least 1");
  a.cu_k = {0, 20};
  expect_rejected(a.params(), "cu_seqlens_k: expected shape (4)");
  a.cu_k = {0, 10, 15, 20};
  ForwardParams p = a.params();
  p.cu_seqlens_k = TensorView{};
  expect_rejected(p, "cu_seqlens_k: is null but cu_seqlens_q is given");
  p = a.params();
  p.cu_seqlens_q.dtype = DType::kFloat32;
  expect_rejected(p, "cu_seqlens_q: expected dtype int32");
  HostTensor dense(DType::kFloat16, {1, 20, 2, 32});
  p = a.params();
  p.q = dense.view();
  expect_rejected(p, "q: expected rank 3 (total_q, heads_q, head_dim)");
  HostTensor lse(DType::kFloat32, {1, 2, 20});
  p = a.params();
  p.lse = lse.view();
  expect_rejected(p, "lse: expected rank 2 (heads_q, total_q)");
}

}  // namespace
}  // namespace flashcore::testing
