// forward_kvcache for calls the decode kernels cannot read in place: a head dim that is not a
// multiple of 8 (they move 16-byte vectors of 8 elements) or cache / output rows that are not
// 16-byte aligned. flash_attn 2.x pads the whole cache to a multiple of 8 and copies it back after
// the call (two passes over every position of every cache row, used or not). Here only what the
// kernels read is copied:
//   1. q, k_new, v_new: padded contiguous copies (staging.h; a few rows each).
//   2. The cache: a padded contiguous (batch, capacity', heads_kv, head_dim') copy holding, for each
//      sequence b, only the positions the attention reads from the old cache, [leftpad_b, L_b);
//      paged caches and cache_batch_idx are resolved on the way, so the copy is a plain contiguous
//      cache indexed by b. capacity' is the longest L_b + seqlen_new when the indices were read
//      (check_indices), else the cache's capacity (then positions past it are guarded as the
//      kernels guard them).
//   3. The decode kernels run on the copies: they append the (rotated) new keys at [L_b, L_b + N)
//      of the copy and attend over [leftpad_b, L_b + N).
//   4. The appended rows (only those, their real columns) go back to the caller's cache, at the
//      positions flash_attn writes, and out's real columns to out.
// Cost: one read of each used key row and two writes of it (copy, then the kernels read the copy)
// plus the append twice, against the kernels' own single read; no pass over unused positions.
// The index tensors stay on the device: the copy kernels read cache_seqlens, cache_leftpad,
// cache_batch_idx and block_table there (no synchronisation beyond the API's checks), and an index
// out of range gathers zeros and scatters nothing, like the kernels (kvcache.h, "Validation").
#include <algorithm>
#include <cstdint>

#include "cuda/common/cuda_check.h"
#include "cuda/device.h"
#include "cuda/kvcache_launch.h"
#include "cuda/staging.h"

namespace flashcore::cuda {
namespace {

constexpr int kThreads = 256;

// Where position `pos` of sequence b lives in the caller's cache, and the sequences' index vectors.
struct CacheMap {
  std::uint16_t* cache;  // fp16 / bf16 bits
  std::int64_t stride0, stride1, stride2;  // (row or page, position or slot, head); head_dim contiguous
  const int* block_table;  // null: contiguous cache
  std::int64_t block_table_stride;
  std::int64_t page_size, max_pages, num_pages;
  const int* cache_batch_idx;  // null: row b
  std::int64_t cache_batch_idx_stride;
  std::int64_t batch_cache;
  const int* cache_seqlens;  // null: every sequence fills the capacity
  std::int64_t cache_seqlens_stride;
  const int* cache_leftpad;  // null: 0
  std::int64_t cache_leftpad_stride;
  std::int64_t capacity;  // positions per sequence of the caller's cache
  std::int64_t batch, heads_kv, head_dim;
};

// The element offset of (b, pos, h, column 0) in the caller's cache, or -1 where the indices point
// outside it.
__device__ std::int64_t cache_offset(const CacheMap& m, std::int64_t b, std::int64_t pos, std::int64_t h) {
  if (pos < 0 || pos >= m.capacity) return -1;
  if (m.block_table != nullptr) {
    const std::int64_t column = pos / m.page_size;
    if (column >= m.max_pages) return -1;
    const std::int64_t page = m.block_table[b * m.block_table_stride + column];
    if (page < 0 || page >= m.num_pages) return -1;
    return page * m.stride0 + (pos % m.page_size) * m.stride1 + h * m.stride2;
  }
  const std::int64_t row = m.cache_batch_idx != nullptr ? m.cache_batch_idx[b * m.cache_batch_idx_stride] : b;
  if (row < 0 || row >= m.batch_cache) return -1;
  return row * m.stride0 + pos * m.stride1 + h * m.stride2;
}

// to_copy:  copy[b, pos, h, c] = c < head_dim ? cache[b, pos, h, c] : 0  for pos in [leftpad_b, L_b)
// else:     cache[b, pos, h, c] = copy[b, pos, h, c] for c < head_dim      for pos in [L_b, L_b + N)
// copy is contiguous (batch, copy_capacity, heads_kv, copy_dim). blockIdx.y strides over sequences.
__global__ void restage_cache_kernel(CacheMap m, std::uint16_t* copy, std::int64_t copy_capacity,
                                     std::int64_t copy_dim, std::int64_t seqlen_new, bool to_copy) {
  const std::int64_t row_elements = m.heads_kv * copy_dim;
  for (std::int64_t b = blockIdx.y; b < m.batch; b += gridDim.y) {
    const std::int64_t length = m.cache_seqlens != nullptr ? m.cache_seqlens[b * m.cache_seqlens_stride] : m.capacity;
    const std::int64_t leftpad = m.cache_leftpad != nullptr ? m.cache_leftpad[b * m.cache_leftpad_stride] : 0;
    const std::int64_t first = to_copy ? std::max<std::int64_t>(leftpad, 0) : length;
    const std::int64_t last = std::min(to_copy ? length : length + seqlen_new, copy_capacity);
    const std::int64_t count = (last - first) * row_elements;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
      const std::int64_t pos = first + i / row_elements;
      const std::int64_t h = (i % row_elements) / copy_dim;
      const std::int64_t c = i % copy_dim;
      const std::int64_t at = cache_offset(m, b, pos, h);
      std::uint16_t* staged = copy + ((b * copy_capacity + pos) * m.heads_kv + h) * copy_dim + c;
      if (to_copy) {
        *staged = (at >= 0 && c < m.head_dim) ? m.cache[at + c] : std::uint16_t{0};
      } else if (at >= 0 && c < m.head_dim) {
        m.cache[at + c] = *staged;
      }
    }
  }
}

CacheMap cache_map(const KvCacheParams& params, const detail::KvCacheProblem& p, const TensorView& cache) {
  const auto index = [](const TensorView& t) { return t.present() ? static_cast<const int*>(t.data) : nullptr; };
  const auto stride = [](const TensorView& t) { return t.present() ? t.stride[0] : std::int64_t{0}; };
  CacheMap m{};
  m.cache = static_cast<std::uint16_t*>(cache.data);
  m.stride0 = cache.stride[0];
  m.stride1 = cache.stride[1];
  m.stride2 = cache.stride[2];
  if (p.paged) {
    m.block_table = index(params.block_table);
    m.block_table_stride = stride(params.block_table);
    m.page_size = p.page_size;
    m.max_pages = p.max_pages;
    m.num_pages = p.num_pages;
  }
  m.cache_batch_idx = index(params.cache_batch_idx);
  m.cache_batch_idx_stride = stride(params.cache_batch_idx);
  m.batch_cache = p.batch_cache;
  m.cache_seqlens = index(params.cache_seqlens);
  m.cache_seqlens_stride = stride(params.cache_seqlens);
  m.cache_leftpad = index(params.cache_leftpad);
  m.cache_leftpad_stride = stride(params.cache_leftpad);
  m.capacity = p.capacity;
  m.batch = p.attn.batch;
  m.heads_kv = p.attn.heads_kv;
  m.head_dim = p.attn.head_dim;
  return m;
}

Status restage_cache(const CacheMap& m, const TensorView& copy, std::int64_t seqlen_new, bool to_copy,
                     cudaStream_t stream) {
  const std::int64_t copy_capacity = copy.shape[1], copy_dim = copy.shape[3];
  const std::int64_t per_sequence = (to_copy ? copy_capacity : std::max<std::int64_t>(seqlen_new, 1)) * m.heads_kv * copy_dim;
  const std::int64_t blocks = (per_sequence + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(std::min<std::int64_t>(blocks, 4096)),
                  static_cast<unsigned>(std::min<std::int64_t>(m.batch, 65535)));
  restage_cache_kernel<<<grid, kThreads, 0, stream>>>(m, static_cast<std::uint16_t*>(copy.data), copy_capacity,
                                                      copy_dim, seqlen_new, to_copy);
  return cuda_status(cudaGetLastError(), "flashcore::forward_kvcache: launching the cache staging copy");
}

}  // namespace

Status forward_kvcache_staged(const KvCacheParams& params, const detail::KvCacheProblem& p,
                              const detail::KvCacheIndices* indices, const DeviceInfo& device) {
  const auto stream = static_cast<cudaStream_t>(params.stream);
  const detail::AttentionProblem staged_attn = staged_problem(p.attn);
  const std::int64_t dim = staged_attn.head_dim;
  // The copy's positions per sequence: enough for every sequence's end when the lengths are known.
  std::int64_t copy_capacity = p.capacity;
  if (indices != nullptr && params.cache_seqlens.present()) {
    copy_capacity = 1;
    for (std::int64_t b = 0; b < p.attn.batch; ++b) copy_capacity = std::max(copy_capacity, indices->end(p, b));
  }

  StagingArea area(stream);
  KvCacheParams staged = params;
  FLASHCORE_RETURN_IF_ERROR(area.stage_input(params.q, dim, &staged.q));
  if (p.has_new()) {
    FLASHCORE_RETURN_IF_ERROR(area.stage_input(params.k_new, dim, &staged.k_new));
    FLASHCORE_RETURN_IF_ERROR(area.stage_input(params.v_new, dim, &staged.v_new));
  }
  FLASHCORE_RETURN_IF_ERROR(area.stage_output(params.out, dim, &staged.out));
  const TensorView like =
      make_view(nullptr, params.k_cache.dtype, Device::kCUDA, {p.attn.batch, copy_capacity, p.attn.heads_kv, dim});
  FLASHCORE_RETURN_IF_ERROR(area.stage_output(like, dim, &staged.k_cache));
  FLASHCORE_RETURN_IF_ERROR(area.stage_output(like, dim, &staged.v_cache));
  const CacheMap k_map = cache_map(params, p, params.k_cache), v_map = cache_map(params, p, params.v_cache);
  FLASHCORE_RETURN_IF_ERROR(restage_cache(k_map, staged.k_cache, p.seqlen_new, /*to_copy=*/true, stream));
  FLASHCORE_RETURN_IF_ERROR(restage_cache(v_map, staged.v_cache, p.seqlen_new, /*to_copy=*/true, stream));

  // The copy is a contiguous cache indexed by sequence: no pages, no cache_batch_idx.
  staged.block_table = TensorView{};
  staged.cache_batch_idx = TensorView{};
  detail::KvCacheProblem staged_p = p;
  staged_p.attn = staged_attn;
  staged_p.paged = false;
  staged_p.num_pages = staged_p.page_size = staged_p.max_pages = 0;
  staged_p.batch_cache = p.attn.batch;
  staged_p.seqlen_cache = copy_capacity;
  staged_p.capacity = copy_capacity;
  FLASHCORE_RETURN_IF_ERROR(launch_decode(staged, staged_p, indices, device));

  if (p.has_new()) {
    FLASHCORE_RETURN_IF_ERROR(restage_cache(k_map, staged.k_cache, p.seqlen_new, /*to_copy=*/false, stream));
    FLASHCORE_RETURN_IF_ERROR(restage_cache(v_map, staged.v_cache, p.seqlen_new, /*to_copy=*/false, stream));
  }
  return area.unstage(staged.out, params.out);
}

}  // namespace flashcore::cuda
