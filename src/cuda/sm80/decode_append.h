// The append step of forward_kvcache: k_new / v_new rows written into the cache at positions
// cache_seqlens[b] + t, k rotated first when the call has rotary (rounded to the dtype, the value
// the attention then reads back). One CTA per (new token, kv head, sequence); it runs before the
// decode kernel on the same stream, so the new keys are in place when the tiles are loaded.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/rotary.h"
#include "cuda/params.h"

namespace flashcore::cuda::sm80 {

// The body, for this family's kernel below and sm90's (sm90/decode_cluster_kernel.h: each family's
// files build their own kernels, never a copy of another family's, which would be compiled for
// another architecture list under the same name).
template <typename Element>
__device__ __forceinline__ void append_new_tokens(const DecodeParams& p) {
  const int t = blockIdx.x;
  const int hk = blockIdx.y;
  const int b = blockIdx.z;
  const int cache_len = p.cache_seqlens == nullptr ? p.capacity : p.cache_seqlens[b * p.cache_seqlens_stride];
  const int pos = cache_len + t;
  if (pos < 0 || pos >= p.capacity) return;  // only reachable when the host skipped its index check
  std::int64_t k_off = 0, v_off = 0;
  if (p.block_table != nullptr) {
    const int page = p.block_table[b * p.block_table_stride + pos / p.page_size];
    if (page < 0 || page >= p.num_pages) return;
    const int slot = pos % p.page_size;
    k_off = page * p.k_cache_strides.batch + slot * p.k_cache_strides.row;
    v_off = page * p.v_cache_strides.batch + slot * p.v_cache_strides.row;
  } else {
    const int row = p.cache_batch_idx == nullptr ? b : p.cache_batch_idx[b * p.cache_batch_idx_stride];
    if (row < 0 || row >= p.batch_cache) return;
    k_off = row * p.k_cache_strides.batch + pos * p.k_cache_strides.row;
    v_off = row * p.v_cache_strides.batch + pos * p.v_cache_strides.row;
  }
  Element* k_dst = static_cast<Element*>(p.k_cache) + k_off + hk * p.k_cache_strides.head;
  Element* v_dst = static_cast<Element*>(p.v_cache) + v_off + hk * p.v_cache_strides.head;
  const Element* k_src =
      static_cast<const Element*>(p.k_new) + b * p.k_new_strides.batch + t * p.k_new_strides.row + hk * p.k_new_strides.head;
  const Element* v_src =
      static_cast<const Element*>(p.v_new) + b * p.v_new_strides.batch + t * p.v_new_strides.row + hk * p.v_new_strides.head;
  const bool rotate = p.rotary_dim > 0 && pos < p.rotary_seqlen;
  const Element* cos_row = static_cast<const Element*>(p.rotary_cos) + pos * p.rotary_cos_stride;
  const Element* sin_row = static_cast<const Element*>(p.rotary_sin) + pos * p.rotary_sin_stride;
  // Every rotated value is computed from k_src before any is stored (the source is not the cache).
  for (int c = threadIdx.x; c < p.head_dim; c += blockDim.x) {
    k_dst[c] = rotate ? static_cast<Element>(rotated_element(k_src, c, cos_row, sin_row, p.rotary_dim,
                                                             p.rotary_interleaved))
                      : k_src[c];
    v_dst[c] = v_src[c];
  }
}

template <typename Element>
__global__ void decode_append_kernel(const __grid_constant__ DecodeParams p) {
  append_new_tokens<Element>(p);
}

}  // namespace flashcore::cuda::sm80
