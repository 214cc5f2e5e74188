// What the sm80 forward kernel reads: raw pointers, element strides and sizes of one call.
// Filled by src/cuda/forward.cu from the validated AttentionProblem.
#pragma once

#include <cstdint>

namespace flashcore::cuda::sm80 {

struct FwdParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  float* lse;  // (batch, heads_q, seqlen_q), may be null

  // Element strides; the head_dim stride is 1 for every tensor.
  std::int64_t q_batch_stride, q_row_stride, q_head_stride;
  std::int64_t k_batch_stride, k_row_stride, k_head_stride;
  std::int64_t v_batch_stride, v_row_stride, v_head_stride;
  std::int64_t o_batch_stride, o_row_stride, o_head_stride;
  std::int64_t lse_batch_stride, lse_head_stride;

  int batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
  int group_size;       // heads_q / heads_kv
  float scale_log2;     // softmax_scale * log2(e): scores go through exp2 with one FFMA
  float softmax_scale;  // for the natural-log LSE
  bool causal;
};

}  // namespace flashcore::cuda::sm80
