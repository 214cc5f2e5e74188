// What every CUDA kernel family reads: raw device pointers, element strides, sizes and score
// options of one call. Filled once by src/cuda/forward.cu and backward.cu from the validated
// AttentionProblem; each family's launcher turns them into its own grid and tiles.
//
// An attention option (sliding window, softcap, ALiBi, ...) is a field here, in the mask/score
// policy in common/, in the validation and in the reference: not a change to every kernel file.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "flashcore/tensor.h"

namespace flashcore::cuda {

// Element strides of a (batch, seqlen, heads, head_dim) tensor; head_dim's stride is 1.
struct TensorStrides {
  std::int64_t batch = 0;
  std::int64_t row = 0;  // one step along seqlen
  std::int64_t head = 0;
};

// Element strides of a (batch, heads, seqlen) float tensor (the LSE); seqlen's stride is 1.
struct RowStatStrides {
  std::int64_t batch = 0;
  std::int64_t head = 0;
};

// Facts of the device a call runs on, read from the driver once per device and process
// (dispatch.cu) and handed down, so no launcher asks the driver again.
struct DeviceInfo {
  int ordinal = 0;
  int compute_capability = 0;  // major * 10 + minor
  int sm_count = 0;
  int max_smem_per_block = 0;  // bytes, with the opt-in above 48 KB
};

// Sizes and score options shared by both passes.
struct ProblemParams {
  int batch = 0;
  int heads_q = 0;
  int heads_kv = 0;
  int seqlen_q = 0;
  int seqlen_k = 0;
  int head_dim = 0;
  int group_size = 1;        // heads_q / heads_kv: query head h reads kv head h / group_size
  float softmax_scale = 0;   // for the natural-log LSE
  float scale_log2 = 0;      // softmax_scale * log2(e): scores go through exp2 with one FFMA
  bool causal = false;       // bottom-right aligned (common/mask.h)
  // Sliding window (common/mask.h): -1 = unbounded; window_right is 0 whenever causal. Values are
  // below seqlen_k / seqlen_q (the validation turns larger ones into -1).
  int window_left = -1;
  int window_right = -1;
  // Score options (common/score_mod.h).
  bool has_score_mod = false;  // softcap > 0, alibi_slopes or dropout
  // Any option (window, softcap, ALiBi or dropout): with has_score_mod, which of a family's kernel variants
  // runs (common/kernel_variant.h); its plain kernels carry no code for any option.
  bool has_options = false;
  float softcap = 0;           // 0: off
  float softcap_scale = 0;     // softmax_scale / softcap (the tanh's argument is q·k times this)
  // The unit the option kernels keep scores in: softcap with a softcap (the tile holds
  // tanh(scale q·k / softcap)), else softmax_scale (the tile holds q·k, as in the plain kernels);
  // the softmax then runs with this scale, so no pass multiplies each score by it.
  float score_unit = 0;
  float score_unit_log2 = 0;   // score_unit * log2(e)
  float alibi_unit_scale = 0;  // 1 / score_unit: a slope in score units
  const float* alibi_slopes = nullptr;  // slope of (b, h) at alibi_slopes[b * alibi_batch_stride + h]; null: off
  std::int64_t alibi_batch_stride = 0;
  // Variable-length batches (attention.h, "varlen"; common/seqlen.h): sequence b is rows
  // [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of the packed tensors, whose batch strides are 0;
  // seqlen_q / seqlen_k above are then the max_seqlen bounds. Null: the dense layout.
  const int* cu_seqlens_q = nullptr;
  const int* cu_seqlens_k = nullptr;
  int total_q = 0;  // rows of the packed q / out (cu_seqlens_q[batch]); 0 dense
  int total_k = 0;  // rows of the packed k / v
  // Dropout (attention.h; common/dropout.h): a runtime branch per tile of the kScoreMod kernels.
  // A probability is kept when its random byte is at most dropout_keep_max; kept ones are scaled by
  // dropout_scale = 1 / (1 - dropout_p).
  bool has_dropout = false;
  std::uint32_t dropout_keep_max = 255;
  float dropout_scale = 1.0f;
  std::uint64_t dropout_seed = 0;
  std::uint32_t dropout_offset = 0;
  DeviceInfo device;         // persistent grids, split counts, shared-memory checks
};

struct FwdParams : ProblemParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;  // (batch, heads_q, seqlen_q), natural log; may be null (not written)

  TensorStrides q_strides, k_strides, v_strides, o_strides;
  RowStatStrides lse_strides;
};

struct BwdParams : ProblemParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* out = nullptr;
  const void* dout = nullptr;
  const float* lse = nullptr;  // (batch, heads_q, seqlen_q), natural log
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;

  TensorStrides q_strides, k_strides, v_strides, o_strides, do_strides, dq_strides, dk_strides, dv_strides;
  RowStatStrides lse_strides;

  // Workspace, carved by backward.cu from the caller's buffer with the family's own layout
  // (all fp32 and contiguous, rows padded to seqlen_q_rounded):
  //   lse_log2 (batch, heads_q, seqlen_q_rounded): lse * log2(e); +inf for rows that see no key
  //            and for padding rows, so that exp2(s - lse_log2) is exactly 0 there.
  //   dsum     (batch, heads_q, seqlen_q_rounded): D = rowsum(dO * O), 0 in padding rows.
  //   dq_accum (num_splits, batch, heads_q, seqlen_q_rounded, head_dim_rounded): dQ / scale, in
  //            the family's own tile order.
  float* lse_log2 = nullptr;
  float* dsum = nullptr;
  float* dq_accum = nullptr;
  std::int64_t dq_accum_split_stride = 0;  // elements in one slice of dq_accum
  int seqlen_q_rounded = 0;
  // The sm90 varlen backward's work list (sm90/bwd_varlen_order.h): (sequence, key block) pairs
  // of ints, longest first, one per CTA of its default-mode grid; null in every other call.
  int* varlen_work = nullptr;

  // Deterministic mode: num_splits CTAs along the key axis, each accumulating dQ into its own
  // slice of dq_accum (one writer per element, so the order of additions is fixed); the slices
  // are summed in order at the end. Otherwise num_splits is 1 and CTAs add into one slice.
  int num_splits = 1;
  bool deterministic = false;
  // Grouped-query heads: CTAs that share a kv head's query heads (the sm90 family's cluster split).
  // 0 lets the family choose; tests and the dev harness set 1, 2 or 4 to compare.
  int forced_kv_splits = 0;
  // The sm90 d256 backward's causal order (sm90/bwd_tile_order.h): (batch, kv head) units per L2
  // section. 0 lets the family choose; the dev harness sets it to measure the rule.
  int forced_l2_section = 0;
};

}  // namespace flashcore::cuda

namespace flashcore::cuda {

// forward_kvcache (flashcore/kvcache.h) as the decode kernels read it, filled by src/cuda/kvcache.cu.
// ProblemParams' seqlen_k is the cache's capacity per sequence; each sequence's own length comes
// from cache_seqlens, cache_leftpad and seqlen_new on the device.
struct DecodeParams : ProblemParams {
  const void* q = nullptr;
  TensorStrides q_strides;
  // Contiguous cache: batch stride steps over cache rows. Paged: over pages, and row over slots.
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  TensorStrides k_cache_strides, v_cache_strides;
  const int* block_table = nullptr;  // (batch, max_pages), last dim contiguous; null: contiguous cache
  std::int64_t block_table_stride = 0;
  int page_size = 0;
  int max_pages = 0;
  int num_pages = 0;
  int batch_cache = 0;  // contiguous: rows of the cache
  int capacity = 0;     // positions per sequence
  // int32 index vectors (batch) with their element strides; null: defaults (capacity, b, 0).
  const int* cache_seqlens = nullptr;
  const int* cache_batch_idx = nullptr;
  const int* cache_leftpad = nullptr;
  std::int64_t cache_seqlens_stride = 0, cache_batch_idx_stride = 0, cache_leftpad_stride = 0;
  // The append: seqlen_new rows of k_new / v_new per sequence go to positions cache_seqlens + t.
  const void* k_new = nullptr;
  const void* v_new = nullptr;
  TensorStrides k_new_strides, v_new_strides;
  int seqlen_new = 0;
  // Rotary: cos/sin (seqlen_ro, rotary_dim / 2) with row strides; rotary_dim 0: none.
  const void* rotary_cos = nullptr;
  const void* rotary_sin = nullptr;
  std::int64_t rotary_cos_stride = 0, rotary_sin_stride = 0;
  int rotary_dim = 0;
  bool rotary_interleaved = true;
  bool rotate_q_per_row = false;  // q row i at cache_seqlens + i (causal or window), else at cache_seqlens

  void* out = nullptr;
  TensorStrides o_strides;
  float* lse = nullptr;  // may be null
  RowStatStrides lse_strides;

  // Split-KV: 0 asks the launcher's heuristic. max_seqlen_k: the longest sequence's key count (the
  // capacity when the indices were not read), for the heuristic.
  int num_splits = 0;
  int max_seqlen_k = 0;
  int rotary_seqlen = 0;  // rows of rotary_cos / rotary_sin (positions past it are left unrotated)
  // Split-KV workspace, set by the launcher: (num_splits, batch, heads_q, seqlen_q, head_dim) partial
  // outputs, normalised within their split, and (num_splits, batch, heads_q, seqlen_q) partial LSEs.
  float* o_accum = nullptr;
  float* lse_accum = nullptr;
  // One arrival counter per (sequence, kv head, row block), zero between calls: the split CTA that
  // arrives last merges the partials (decode_combine.h) and resets its counter. Null: a separate
  // combine kernel merges them instead.
  unsigned* split_counters = nullptr;
  // The launcher of an older family's row for the same problem (kvcache.cu sets it for an sm90 row
  // under kernels=auto): sm90's cluster launcher hands it the problems its heuristic keeps off the
  // cluster kernel (sm90/decode_launch_template.h). Null (a forced family, or no sm80 row built):
  // the cluster kernel serves everything.
  Status (*fallback)(const DecodeParams& params, cudaStream_t stream) = nullptr;
};

}  // namespace flashcore::cuda
