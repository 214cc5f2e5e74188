// The validated description of one attention call, shared by every backend.
#pragma once

#include <cstdint>

#include "flashcore/attention.h"

namespace flashcore::detail {

struct AttentionProblem {
  std::int64_t batch = 0;
  std::int64_t seqlen_q = 0;
  std::int64_t seqlen_k = 0;
  std::int64_t heads_q = 0;
  std::int64_t heads_kv = 0;
  std::int64_t head_dim = 0;
  DType dtype = DType::kFloat16;
  Device device = Device::kCPU;
  Backend backend = Backend::kAuto;  // resolved: never kAuto after validation
  KernelFamily kernels = KernelFamily::kAuto;  // as requested (the CUDA dispatch resolves kAuto)
  float softmax_scale = 0.0f;        // resolved: the default already applied
  bool causal = false;
  // The window (attention.h), normalised: causal sets window_right to 0; a bound that excludes no
  // key (window_left >= seqlen_k, window_right >= seqlen_q) becomes -1, so every value is -1 or
  // below seqlen_k / seqlen_q and fits an int; a window of (-1, 0) sets causal.
  std::int64_t window_left = -1;
  std::int64_t window_right = -1;
  float softcap = 0.0f;  // 0: off
  // ALiBi: slope of (batch b, query head h) at alibi_slopes[b * alibi_batch_stride + h] (float32 on
  // the problem's device; null: no ALiBi; stride 0 for (heads_q) slopes).
  const float* alibi_slopes = nullptr;
  std::int64_t alibi_batch_stride = 0;
  // Variable-length batches (attention.h, "varlen"): seqlen_q / seqlen_k above are then the
  // max_seqlen bounds, and the tensors are packed along total_q / total_k rows.
  const std::int32_t* cu_seqlens_q = nullptr;  // null: the dense layout
  const std::int32_t* cu_seqlens_k = nullptr;
  std::int64_t total_q = 0;
  std::int64_t total_k = 0;
  // Dropout (attention.h, "dropout"): 0 = off. dropout_batch0 is added to the batch index of the
  // random stream: the CPU backends run a varlen call as one dense call per sequence
  // (varlen_split.h), each of which must draw sequence b's mask, not batch 0's.
  float dropout_p = 0.0f;
  std::uint64_t dropout_seed = 0;
  std::uint32_t dropout_offset = 0;
  std::int64_t dropout_batch0 = 0;

  std::int64_t group_size() const { return heads_q / heads_kv; }  // query heads per kv head
  bool has_window() const { return window_left >= 0 || (window_right >= 0 && !causal); }
  bool has_score_mod() const { return softcap > 0.0f || alibi_slopes != nullptr; }
  bool varlen() const { return cu_seqlens_q != nullptr; }
  bool has_dropout() const { return dropout_p > 0.0f; }
};

// Check every argument and fill `problem`. On failure nothing else has happened and the message
// names the offending argument.
Status validate_forward(const ForwardParams& params, AttentionProblem* problem);
Status validate_backward(const BackwardParams& params, AttentionProblem* problem);

}  // namespace flashcore::detail

namespace flashcore::detail {

// Pieces of the checks above that other entry points (forward_kvcache) reuse, with their messages
// prefixed by `function`.
// A rank-`rank` tensor with positive sizes, non-negative strides, a contiguous last dimension and
// offsets that fit in int64 (`dims` names the dimensions in messages).
Status validate_layout(const char* function, const char* name, const TensorView& t, int rank, const char* dims);
// window_size, softcap and alibi_slopes against p's sizes, normalised into p as validate_forward does.
Status validate_score_options(const char* function, std::int64_t window_left, std::int64_t window_right, float softcap,
                              const TensorView& alibi_slopes, AttentionProblem* p);

}  // namespace flashcore::detail
