// What the sm80 backward kernels read: raw pointers, element strides and sizes of one call, plus
// the scratch buffers carved out of the workspace. Filled by src/cuda/backward.cu.
#pragma once

#include <cstdint>

namespace flashcore::cuda::sm80 {

struct BwdParams {
  const void* q;
  const void* k;
  const void* v;
  const void* out;
  const void* dout;
  const float* lse;  // (batch, heads_q, seqlen_q), natural log
  void* dq;
  void* dk;
  void* dv;

  // Element strides; the head_dim stride is 1 for every tensor.
  std::int64_t q_batch_stride, q_row_stride, q_head_stride;
  std::int64_t k_batch_stride, k_row_stride, k_head_stride;
  std::int64_t v_batch_stride, v_row_stride, v_head_stride;
  std::int64_t o_batch_stride, o_row_stride, o_head_stride;
  std::int64_t do_batch_stride, do_row_stride, do_head_stride;
  std::int64_t dq_batch_stride, dq_row_stride, dq_head_stride;
  std::int64_t dk_batch_stride, dk_row_stride, dk_head_stride;
  std::int64_t dv_batch_stride, dv_row_stride, dv_head_stride;
  std::int64_t lse_batch_stride, lse_head_stride;

  // Workspace, all fp32 and contiguous, rows padded to seqlen_q_rounded:
  //   lse_log2 (batch, heads_q, seqlen_q_rounded): lse * log2(e); +inf for rows that see no key
  //            and for padding rows, so that exp2(s - lse_log2) is exactly 0 there.
  //   dsum     (batch, heads_q, seqlen_q_rounded): D = rowsum(dO * O), 0 in padding rows.
  //   dq_accum (num_splits, batch, heads_q, seqlen_q_rounded, head_dim_rounded): dQ / scale; each
  //            kBlockM-row tile in the dQ MMA's fragment order (bwd_dq_accum.h), not row-major.
  float* lse_log2;
  float* dsum;
  float* dq_accum;
  std::int64_t dq_accum_split_stride;  // elements in one slice of dq_accum

  int batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
  int group_size;        // heads_q / heads_kv
  int seqlen_q_rounded;  // a multiple of every kernel's kBlockM (kSeqlenQRounding)
  // Deterministic mode: the main kernel's grid has num_splits CTAs along the key axis, each
  // looping over key blocks split, split + num_splits, ... and accumulating dQ into its own slice
  // of dq_accum (one writer per element, so the order of additions is fixed); the slices are
  // summed in order at the end. Otherwise num_splits is 1 and every key block gets a CTA that
  // adds into the one slice with atomics.
  int num_splits;
  bool deterministic;
  float softmax_scale;
  float scale_log2;  // softmax_scale * log2(e)
  bool causal;
};

// Padding of seqlen_q in the workspace: a multiple of every backward kBlockM, so a query block's
// rows never index past the buffers and need no bounds checks there.
inline constexpr int kSeqlenQRounding = 128;

}  // namespace flashcore::cuda::sm80
