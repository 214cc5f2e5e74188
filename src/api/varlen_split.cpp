// flashcore's varlen layout on the CPU backends as dense calls per sequence (varlen_split.h).
#include "api/varlen_split.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace flashcore::detail {
namespace {

struct Range {
  std::int64_t begin;
  std::int64_t length;
};

Range sequence(const std::int32_t* offsets, std::int64_t b) { return {offsets[b], offsets[b + 1] - offsets[b]}; }

char* element_at(const TensorView& t, std::int64_t offset) {
  return static_cast<char*>(t.data) + offset * static_cast<std::int64_t>(dtype_size(t.dtype));
}

// Rows [r.begin, r.begin + r.length) of a packed (total, heads, head_dim) tensor as a dense
// (1, length, heads, head_dim) view.
TensorView dense_rows(const TensorView& packed, Range r) {
  TensorView t = packed;
  t.data = element_at(packed, r.begin * packed.stride[0]);
  t.rank = 4;
  t.shape[0] = 1;
  t.shape[1] = r.length;
  t.shape[2] = packed.shape[1];
  t.shape[3] = packed.shape[2];
  t.stride[0] = r.length * packed.stride[0];
  t.stride[1] = packed.stride[0];
  t.stride[2] = packed.stride[1];
  t.stride[3] = packed.stride[2];
  return t;
}

// Columns [r.begin, ...) of a (heads, total) LSE as a dense (1, heads, length) view.
TensorView dense_lse(const TensorView& packed, Range r) {
  if (!packed.present()) return packed;
  TensorView t = packed;
  t.data = element_at(packed, r.begin * packed.stride[1]);
  t.rank = 3;
  t.shape[0] = 1;
  t.shape[1] = packed.shape[0];
  t.shape[2] = r.length;
  t.stride[0] = packed.shape[0] * packed.stride[0];
  t.stride[1] = packed.stride[0];
  t.stride[2] = packed.stride[1];
  return t;
}

// Sequence b's ALiBi slopes: (heads_q) as given, or row b of (batch, heads_q).
TensorView sequence_slopes(const TensorView& slopes, std::int64_t b) {
  if (!slopes.present() || slopes.rank == 1) return slopes;
  TensorView t = slopes;
  t.data = element_at(slopes, b * slopes.stride[0]);
  t.rank = 1;
  t.shape[0] = slopes.shape[1];
  t.stride[0] = slopes.stride[1];
  return t;
}

void zero_rows(const TensorView& packed, Range r) {
  const std::size_t row_bytes = static_cast<std::size_t>(packed.shape[2]) * dtype_size(packed.dtype);
  for (std::int64_t i = r.begin; i < r.begin + r.length; ++i)
    for (std::int64_t h = 0; h < packed.shape[1]; ++h)
      std::memset(element_at(packed, i * packed.stride[0] + h * packed.stride[1]), 0, row_bytes);
}

void fill_lse(const TensorView& lse, Range r, float value) {
  if (!lse.present()) return;
  for (std::int64_t h = 0; h < lse.shape[0]; ++h)
    for (std::int64_t i = r.begin; i < r.begin + r.length; ++i)
      static_cast<float*>(lse.data)[h * lse.stride[0] + i * lse.stride[1]] = value;
}

template <class Params>
void make_dense(Params* dense, const Params& params, std::int64_t b) {
  dense->cu_seqlens_q = TensorView{};
  dense->cu_seqlens_k = TensorView{};
  dense->max_seqlen_q = 0;
  dense->max_seqlen_k = 0;
  dense->alibi_slopes = sequence_slopes(params.alibi_slopes, b);
}

// Sequence b's dense call: validated like any call, with dropout drawing sequence b's stream.
Status run_dense(const ForwardParams& dense, std::int64_t b) {
  AttentionProblem problem;
  FLASHCORE_RETURN_IF_ERROR(validate_forward(dense, &problem));
  problem.dropout_batch0 = b;
  return run_forward(dense, problem);
}

Status run_dense(const BackwardParams& dense, std::int64_t b) {
  AttentionProblem problem;
  FLASHCORE_RETURN_IF_ERROR(validate_backward(dense, &problem));
  problem.dropout_batch0 = b;
  return run_backward(dense, problem);
}

}  // namespace

Status forward_by_sequence(const ForwardParams& params, const AttentionProblem& p) {
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const Range rq = sequence(p.cu_seqlens_q, b);
    const Range rk = sequence(p.cu_seqlens_k, b);
    if (rq.length == 0) continue;
    if (rk.length == 0) {  // rows that see no key
      zero_rows(params.out, rq);
      fill_lse(params.lse, rq, -INFINITY);
      continue;
    }
    ForwardParams dense = params;
    make_dense(&dense, params, b);
    dense.q = dense_rows(params.q, rq);
    dense.k = dense_rows(params.k, rk);
    dense.v = dense_rows(params.v, rk);
    dense.out = dense_rows(params.out, rq);
    dense.lse = dense_lse(params.lse, rq);
    FLASHCORE_RETURN_IF_ERROR(run_dense(dense, b));
  }
  return Status::Ok();
}

Status backward_by_sequence(const BackwardParams& params, const AttentionProblem& p) {
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const Range rq = sequence(p.cu_seqlens_q, b);
    const Range rk = sequence(p.cu_seqlens_k, b);
    if (rq.length == 0 || rk.length == 0) {  // no pair: every gradient of the sequence is 0
      zero_rows(params.dq, rq);
      zero_rows(params.dk, rk);
      zero_rows(params.dv, rk);
      continue;
    }
    BackwardParams dense = params;
    make_dense(&dense, params, b);
    dense.q = dense_rows(params.q, rq);
    dense.k = dense_rows(params.k, rk);
    dense.v = dense_rows(params.v, rk);
    dense.out = dense_rows(params.out, rq);
    dense.dout = dense_rows(params.dout, rq);
    dense.lse = dense_lse(params.lse, rq);
    dense.dq = dense_rows(params.dq, rq);
    dense.dk = dense_rows(params.dk, rk);
    dense.dv = dense_rows(params.dv, rk);
    FLASHCORE_RETURN_IF_ERROR(run_dense(dense, b));
  }
  return Status::Ok();
}

}  // namespace flashcore::detail
