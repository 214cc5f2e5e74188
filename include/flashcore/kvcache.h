// forward_kvcache(): attention of a few new query tokens against a KV cache, with the new keys and
// values appended to the cache in place first: flash_attn 2.x's flash_attn_with_kvcache, for
// decoding (seqlen_q = 1) and speculative decoding (seqlen_q > 1).
//
// Layouts (head_dim contiguous, any other strides):
//   q, out          (batch, seqlen_q, heads_q, head_dim)
//   k_cache,        contiguous cache: (batch_cache, seqlen_cache, heads_kv, head_dim)
//   v_cache         paged cache:      (num_pages, page_size, heads_kv, head_dim), any page_size >= 1
//   block_table     int32 (batch, max_pages): the pages of each sequence, in order (paged only)
//   k_new, v_new    optional (batch, seqlen_new, heads_kv, head_dim): appended to the cache
//   cache_seqlens   optional int32 (batch): each sequence's cache length before the append; absent:
//                   every sequence fills its cache (seqlen_cache, or max_pages * page_size)
//   cache_batch_idx optional int32 (batch): row of a contiguous cache each sequence uses (absent:
//                   row b); distinct when k_new is given
//   cache_leftpad   optional int32 (batch): where each sequence starts in its cache (absent: 0)
//   rotary_cos/sin  optional (seqlen_ro, rotary_dim / 2), q's dtype; needs k_new
//   alibi_slopes    optional float32 (heads_q) or (batch, heads_q)
//   lse             optional float32 (batch, heads_q, seqlen_q), natural log
//
// Semantics, per sequence b, with L = cache_seqlens[b], P = cache_leftpad[b], N = seqlen_new:
//   1. Rotary (when given) rotates k_new[b, t] at position L + t and q[b, i] at position L + i
//      (causal or a sliding window) or L (otherwise), as flash_attn does: interleaved pairs
//      (x[2i], x[2i+1]) (GPT-J) or halves (x[i], x[i + rotary_dim/2]) (GPT-NeoX); columns past
//      rotary_dim are kept. Positions are the cache's own indices (leftpad included), as in flash_attn.
//   2. k_new / v_new (rotated k, rounded to the dtype) are written to cache positions L .. L+N-1.
//   3. Attention of q over the keys at cache positions P .. L+N-1 (seqlen_k = L + N - P), with
//      attention.h's rules for that seqlen_k: causal aligned bottom-right, window, softcap, ALiBi,
//      GQA; a row that sees no key gets 0 and an LSE of -inf.
//   Paged: position p of sequence b lives in page block_table[b, p / page_size], slot p % page_size.
//
// Validation: shapes, dtypes and every index are checked before anything is written: out-of-range
// page ids (in the pages a sequence uses), cache_batch_idx out of range or repeated (with k_new),
// leftpad beyond cache_seqlens, L + N beyond the cache, a rotary table shorter than L + N. For CUDA
// tensors the int32 arrays are copied to the host for this (one small synchronous copy on the
// stream); check_indices = false skips it (no synchronisation: for CUDA graphs and trusted
// serving loops), and the kernels then only guard their own memory accesses: a page id outside
// [0, num_pages), a position past the capacity or a cache row outside the cache is read as zeros
// and not written; the results of such a call are unspecified. CPU calls are always checked.
//
// CUDA head dims that are not a multiple of 8 (and cache or output rows that are not 16-byte
// aligned) run on padded copies of what the decode kernels read, and only the appended rows are
// written back to the caller's cache (src/cuda/kvcache_staging.cu; docs/flash_attn_compat.md).
//
// CUDA split-KV memory: the partial results of a split call live in a workspace the library keeps
// per (device, stream), grown outside stream capture and never freed (a graph captured earlier may
// use it), so a call under a CUDA graph adds no allocation nodes when its stream has run a call of
// that size before (warm up on the capture stream). Calls on one stream share it safely; a graph
// uses its capture stream's workspace, so do not replay it concurrently with calls on that stream
// or with another graph captured on it. A call that fails inside the kernels may leave the
// workspace's arrival counters non-zero (later split calls on that stream are then unspecified).
#pragma once

#include <cstdint>
#include <optional>

#include "flashcore/attention.h"
#include "flashcore/tensor.h"

namespace flashcore {

struct KvCacheParams {
  TensorView q;
  TensorView k_cache;
  TensorView v_cache;
  TensorView k_new;  // optional, with v_new
  TensorView v_new;
  TensorView rotary_cos;  // optional, with rotary_sin
  TensorView rotary_sin;
  bool rotary_interleaved = true;
  TensorView cache_seqlens;    // optional int32 (batch)
  TensorView cache_batch_idx;  // optional int32 (batch); contiguous caches only
  TensorView cache_leftpad;    // optional int32 (batch)
  TensorView block_table;      // optional int32 (batch, max_pages): paged cache when present
  TensorView out;
  TensorView lse;  // optional
  std::optional<float> softmax_scale;  // default 1/sqrt(head_dim)
  bool causal = false;
  std::int64_t window_left = -1;
  std::int64_t window_right = -1;
  float softcap = 0.0f;
  TensorView alibi_slopes;
  // Split-KV: CTAs per (sequence, kv head) along the keys, merged through their LSE. 0: chosen by
  // the heuristic (docs/kvcache.md); 1: no split. CPU backends ignore it.
  int num_splits = 0;
  bool check_indices = true;  // see "Validation" above
  Backend backend = Backend::kAuto;
  KernelFamily kernels = KernelFamily::kAuto;
  void* stream = nullptr;
  int num_threads = 0;
};

Status forward_kvcache(const KvCacheParams& params);

}  // namespace flashcore
