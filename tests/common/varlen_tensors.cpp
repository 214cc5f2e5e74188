// See varlen_tensors.h.
#include "common/varlen_tensors.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <string>

#include "flashcore/reference.h"

namespace flashcore::testing {
namespace {

using namespace flashcore::accuracy;

std::vector<std::int32_t> offsets_of(const std::vector<std::int32_t>& lens) {
  std::vector<std::int32_t> offsets(lens.size() + 1, 0);
  std::partial_sum(lens.begin(), lens.end(), offsets.begin() + 1);
  return offsets;
}

// Rows [begin, begin + n) of a packed (total, heads, d) array: a dense (1, n, heads, d) one.
std::vector<double> rows(const std::vector<double>& packed, std::int64_t begin, std::int64_t n, std::int64_t width) {
  return {packed.begin() + begin * width, packed.begin() + (begin + n) * width};
}

void put_rows(std::vector<double>* packed, const std::vector<double>& dense, std::int64_t begin, std::int64_t width) {
  std::copy(dense.begin(), dense.end(), packed->begin() + begin * width);
}

// n lengths cycling through short ones (0 and 1 among them), the k lengths shifted by one step.
std::vector<std::int32_t> many_short_lengths(int n, int shift) {
  static constexpr std::int32_t kCycle[] = {17, 0, 129, 1, 64, 40, 3, 130, 9, 77, 128, 2};
  std::vector<std::int32_t> lens(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) lens[static_cast<std::size_t>(i)] = kCycle[(i + shift) % 12];
  return lens;
}

}  // namespace

const std::vector<VarlenCase>& varlen_cases() {
  static const std::vector<VarlenCase> cases = {
      {"plain", {37, 1, 130, 64}, {37, 1, 130, 64}, 2, 2, 64},
      {"causal_gqa_sq_ne_sk", {20, 90, 3}, {50, 40, 129}, 4, 2, 32, true},
      {"empty_sequences", {70, 0, 33, 5}, {70, 12, 0, 200}, 2, 1, 64},
      {"all_options", {60, 129, 17}, {90, 129, 17}, 4, 2, 40, true, 20, -1, 1.5f, true},
      {"window_both_sides", {100, 65}, {80, 65}, 2, 2, 64, false, 10, 5},
      {"long_causal_d128", {700, 300, 1}, {700, 400, 9}, 2, 1, 128, true, -1, -1, 0.0f, true},
      {"dropout_all_options", {60, 0, 129, 17}, {90, 5, 129, 17}, 4, 2, 64, true, 20, -1, 1.5f, true, 0.17f},
      {"dropout", {37, 1, 130, 64}, {37, 1, 200, 64}, 2, 1, 128, false, -1, -1, 0.0f, false, 0.3f},
      // A narrow causal window with dropout: on an H100 the sm90 window kernel, with each
      // sequence's causal row offset rounded to 16 rows for dropout's stream.
      {"window_causal_dropout_d128", {300, 1, 700, 129}, {300, 60, 900, 129}, 2, 1, 128, true, 100, -1, 0.0f, false,
       0.2f},
      // GQA 4:1 (the sm90 backward's cluster split), empty and 1-token sequences, Sq != Sk both ways.
      {"causal_gqa4_d128", {300, 1, 0, 129, 64}, {200, 7, 30, 129, 300}, 8, 2, 128, true},
      // 70 sequences: more than a warp's 32 offsets (the sm90 backward's slot search, bwd_sequence.h).
      {"many_short", many_short_lengths(70, 0), many_short_lengths(70, 1), 2, 1, 64, true},
  };
  return cases;
}

VarlenTensors::VarlenTensors(const VarlenCase& c_, DType dtype_)
    : c(c_),
      dtype(dtype_),
      batch(static_cast<std::int64_t>(c_.lens_q.size())),
      cu_q(offsets_of(c_.lens_q)),
      cu_k(offsets_of(c_.lens_k)) {
  total_q = cu_q.back();
  total_k = cu_k.back();
  max_q = *std::max_element(c.lens_q.begin(), c.lens_q.end());
  max_k = *std::max_element(c.lens_k.begin(), c.lens_k.end());
  scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const std::int64_t d = c.head_dim;
  q = HostTensor(dtype, {total_q, c.heads_q, d});
  k = HostTensor(dtype, {total_k, c.heads_kv, d});
  v = HostTensor(dtype, {total_k, c.heads_kv, d});
  dout = HostTensor(dtype, {total_q, c.heads_q, d});
  out = HostTensor(dtype, {total_q, c.heads_q, d});
  lse = HostTensor(DType::kFloat32, {c.heads_q, total_q});
  dq = HostTensor(dtype, {total_q, c.heads_q, d});
  dk = HostTensor(dtype, {total_k, c.heads_kv, d});
  dv = HostTensor(dtype, {total_k, c.heads_kv, d});
  std::mt19937_64 rng(std::hash<std::string>{}(c.name) + static_cast<std::uint64_t>(dtype));
  for (HostTensor* t : {&q, &k, &v, &dout}) t->fill_normal(rng);
  slopes.resize(static_cast<size_t>(batch * c.heads_q));
  for (float& s : slopes) s = std::uniform_real_distribution<float>(0.0f, 0.3f)(rng);
}

ForwardParams VarlenTensors::forward_params(Backend backend) const {
  ForwardParams p;
  p.q = q.view(), p.k = k.view(), p.v = v.view(), p.out = out.view(), p.lse = lse.view();
  p.softmax_scale = scale;
  p.causal = c.causal;
  p.backend = backend;
  p.window_left = c.window_left, p.window_right = c.window_right, p.softcap = c.softcap;
  if (c.alibi) {
    p.alibi_slopes = make_view(const_cast<float*>(slopes.data()), DType::kFloat32, Device::kCPU, {batch, c.heads_q});
  }
  p.cu_seqlens_q = make_view(const_cast<std::int32_t*>(cu_q.data()), DType::kInt32, Device::kCPU, {batch + 1});
  p.cu_seqlens_k = make_view(const_cast<std::int32_t*>(cu_k.data()), DType::kInt32, Device::kCPU, {batch + 1});
  p.max_seqlen_q = max_q, p.max_seqlen_k = max_k;
  p.dropout_p = c.dropout_p, p.dropout_seed = kVarlenDropoutSeed, p.dropout_offset = kVarlenDropoutOffset;
  return p;
}

BackwardParams VarlenTensors::backward_params(Backend backend) const {
  const ForwardParams f = forward_params(backend);
  BackwardParams p;
  p.q = f.q, p.k = f.k, p.v = f.v, p.out = f.out, p.lse = f.lse, p.dout = dout.view();
  p.dq = dq.view(), p.dk = dk.view(), p.dv = dv.view();
  p.softmax_scale = scale, p.causal = c.causal, p.backend = backend;
  p.window_left = c.window_left, p.window_right = c.window_right, p.softcap = c.softcap;
  p.alibi_slopes = f.alibi_slopes, p.cu_seqlens_q = f.cu_seqlens_q, p.cu_seqlens_k = f.cu_seqlens_k;
  p.max_seqlen_q = max_q, p.max_seqlen_k = max_k;
  p.dropout_p = c.dropout_p, p.dropout_seed = kVarlenDropoutSeed, p.dropout_offset = kVarlenDropoutOffset;
  return p;
}

std::vector<Comparison> VarlenTensors::check(bool gradients) const {
  const std::int64_t d = c.head_dim, wq = c.heads_q * d, wk = c.heads_kv * d;
  std::vector<double> ref_out(q.numel(), 0.0), base_out(q.numel(), 0.0);
  std::vector<double> ref_lse(lse.numel(), -INFINITY), base_lse(lse.numel(), -INFINITY);
  std::vector<double> ref_dq(q.numel(), 0.0), ref_dk(k.numel(), 0.0), ref_dv(k.numel(), 0.0);
  std::vector<double> base_dq(q.numel(), 0.0), base_dk(k.numel(), 0.0), base_dv(k.numel(), 0.0);
  const std::vector<double> qv = q.values(), kv = k.values(), vv = v.values(), dov = dout.values();
  for (std::int64_t b = 0; b < batch; ++b) {
    // Sequences without keys or queries: out 0, LSE -inf, gradients 0 (what the arrays hold).
    const std::int64_t nq = c.lens_q[b], nk = c.lens_k[b];
    if (nq == 0 || nk == 0) continue;
    ReferenceProblem r;
    r.batch = 1, r.seqlen_q = nq, r.seqlen_k = nk, r.heads_q = c.heads_q, r.heads_kv = c.heads_kv, r.head_dim = d;
    r.softmax_scale = scale, r.causal = c.causal, r.window_left = c.window_left, r.window_right = c.window_right;
    r.softcap = c.softcap;
    r.dropout_p = c.dropout_p, r.dropout_seed = kVarlenDropoutSeed, r.dropout_offset = kVarlenDropoutOffset;
    r.dropout_first_batch = b;  // the sequence's own stream
    std::vector<double> seq_slopes(slopes.begin() + b * c.heads_q, slopes.begin() + (b + 1) * c.heads_q);
    if (c.alibi) r.alibi_slopes = seq_slopes.data();
    const auto sq = rows(qv, cu_q[b], nq, wq), sk = rows(kv, cu_k[b], nk, wk), sv = rows(vv, cu_k[b], nk, wk);
    const auto sdo = rows(dov, cu_q[b], nq, wq);
    std::vector<double> o(sq.size()), l(static_cast<size_t>(c.heads_q * nq)), gq(sq.size()), gk(sk.size());
    std::vector<double> gv(sk.size());
    reference_forward(r, sq.data(), sk.data(), sv.data(), o.data(), l.data());
    const BaselineForward bf = baseline_forward(r, dtype, sq, sk, sv);
    put_rows(&ref_out, o, cu_q[b], wq), put_rows(&base_out, bf.out, cu_q[b], wq);
    if (gradients) {
      reference_backward(r, sq.data(), sk.data(), sv.data(), sdo.data(), gq.data(), gk.data(), gv.data());
      const BaselineBackward bb = baseline_backward(r, dtype, sq, sk, sv, sdo);
      put_rows(&ref_dq, gq, cu_q[b], wq), put_rows(&base_dq, bb.dq, cu_q[b], wq);
      put_rows(&ref_dk, gk, cu_k[b], wk), put_rows(&base_dk, bb.dk, cu_k[b], wk);
      put_rows(&ref_dv, gv, cu_k[b], wk), put_rows(&base_dv, bb.dv, cu_k[b], wk);
    }
    for (std::int64_t h = 0; h < c.heads_q; ++h)
      for (std::int64_t i = 0; i < nq; ++i) {
        ref_lse[h * total_q + cu_q[b] + i] = l[h * nq + i];
        base_lse[h * total_q + cu_q[b] + i] = bf.lse[h * nq + i];
      }
  }
  std::vector<Comparison> result = {compare_to_reference("out", dtype, 2.0, out.values(), base_out, ref_out),
                                    compare_to_reference("lse", DType::kFloat32, 2.0, lse.values(), base_lse, ref_lse)};
  if (gradients) {
    result.push_back(compare_to_reference("dq", dtype, 3.0, dq.values(), base_dq, ref_dq));
    result.push_back(compare_to_reference("dk", dtype, 3.0, dk.values(), base_dk, ref_dk));
    result.push_back(compare_to_reference("dv", dtype, 3.0, dv.values(), base_dv, ref_dv));
  }
  const std::vector<double> got_lse = lse.values();
  Comparison empty_rows;
  empty_rows.ok = true;
  empty_rows.message = "lse: -inf exactly for rows that see no key";
  for (size_t i = 0; i < got_lse.size(); ++i) {
    if ((std::isinf(got_lse[i]) && got_lse[i] < 0) != (std::isinf(ref_lse[i]) && ref_lse[i] < 0)) {
      empty_rows.ok = false;
      empty_rows.message = "lse: entry " + std::to_string(i) + " is " + std::to_string(got_lse[i]) + ", reference " +
                           std::to_string(ref_lse[i]);
      break;
    }
  }
  result.push_back(empty_rows);
  return result;
}

}  // namespace flashcore::testing
