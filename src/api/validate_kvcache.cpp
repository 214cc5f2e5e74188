// Argument validation for forward_kvcache(): every rejection names the argument, and nothing has
// been written when one is returned.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "api/kvcache_problem.h"

namespace flashcore::detail {
namespace {

constexpr const char* kFn = "flashcore::forward_kvcache";

Status fail(const std::string& argument, const std::string& what) {
  return Status::InvalidArgument(std::string(kFn) + ": " + argument + ": " + what);
}

std::string str(std::int64_t v) { return std::to_string(v); }

std::string shape_string(const TensorView& t) {
  std::ostringstream out;
  out << "(";
  for (int i = 0; i < t.rank && i < kMaxRank; ++i) out << (i ? ", " : "") << t.shape[i];
  out << ")";
  return out.str();
}

Status check_like(const char* name, const TensorView& t, DType dtype, Device device) {
  if (t.dtype != dtype) return fail(name, std::string("expected dtype ") + dtype_name(dtype) + ", got " + dtype_name(t.dtype));
  if (t.device != device) {
    return fail(name, std::string("expected a ") + device_name(device) + " tensor like q, got a " +
                          device_name(t.device) + " tensor");
  }
  return Status::Ok();
}

// Dimensions i of `t` must equal want[i] (-1: any).
Status check_dims(const char* name, const TensorView& t, std::initializer_list<std::int64_t> want, const char* dims) {
  int i = 0;
  for (std::int64_t w : want) {
    if (w >= 0 && t.shape[i] != w) {
      return fail(name, "dimension " + str(i) + " of " + dims + " must be " + str(w) + ", got shape " + shape_string(t));
    }
    ++i;
  }
  return Status::Ok();
}

// A rank-`rank` tensor of `dtype` on q's device.
Status check_tensor(const char* name, const TensorView& t, int rank, const char* dims, DType dtype, Device device) {
  FLASHCORE_RETURN_IF_ERROR(validate_layout(kFn, name, t, rank, dims));
  return check_like(name, t, dtype, device);
}

Status check_index_vector(const char* name, const TensorView& t, const AttentionProblem& a) {
  if (!t.present()) return Status::Ok();
  FLASHCORE_RETURN_IF_ERROR(check_tensor(name, t, 1, "(batch)", DType::kInt32, a.device));
  return check_dims(name, t, {a.batch}, "(batch)");
}

Status resolve_backend(Backend backend, KernelFamily kernels, AttentionProblem* p) {
  switch (backend) {
    case Backend::kAuto: p->backend = p->device == Device::kCUDA ? Backend::kCuda : Backend::kCpu; break;
    case Backend::kCpu:
    case Backend::kCpuReference:
      if (p->device != Device::kCPU) return fail("backend", std::string(backend_name(backend)) + " needs CPU tensors");
      p->backend = backend;
      break;
    case Backend::kCuda:
      if (p->device != Device::kCUDA) return fail("backend", "cuda needs CUDA tensors, got CPU tensors");
      p->backend = backend;
      break;
    default: return fail("backend", "unknown backend value " + str(static_cast<int>(backend)));
  }
  switch (kernels) {
    case KernelFamily::kAuto: break;
    case KernelFamily::kSm80:
    case KernelFamily::kSm90:
      if (p->backend != Backend::kCuda) {
        return fail("kernels", std::string(kernel_family_name(kernels)) + " names GPU kernels, but the call runs on " +
                                   backend_name(p->backend) + " (use kernels=auto)");
      }
      break;
    default: return fail("kernels", "unknown kernel family value " + str(static_cast<int>(kernels)));
  }
  p->kernels = kernels;
  return Status::Ok();
}

constexpr const char* kQDims = "(batch, seqlen_q, heads_q, head_dim)";
constexpr const char* kCacheDims = "(batch_cache, seqlen_cache, heads_kv, head_dim)";
constexpr const char* kPagedDims = "(num_pages, page_size, heads_kv, head_dim)";
constexpr const char* kNewDims = "(batch, seqlen_new, heads_kv, head_dim)";

Status check_caches(const KvCacheParams& params, KvCacheProblem* p) {
  AttentionProblem& a = p->attn;
  p->paged = params.block_table.present();
  const char* dims = p->paged ? kPagedDims : kCacheDims;
  FLASHCORE_RETURN_IF_ERROR(check_tensor("k_cache", params.k_cache, 4, dims, a.dtype, a.device));
  FLASHCORE_RETURN_IF_ERROR(check_tensor("v_cache", params.v_cache, 4, dims, a.dtype, a.device));
  const TensorView& k = params.k_cache;
  if (k.shape[3] != a.head_dim) {
    return fail("k_cache", "head_dim " + str(k.shape[3]) + " does not match q's head_dim " + str(a.head_dim));
  }
  a.heads_kv = k.shape[2];
  if (a.heads_q % a.heads_kv != 0) {
    return fail("k_cache", "heads_q (" + str(a.heads_q) + ") must be a multiple of heads_kv (" + str(a.heads_kv) + ")");
  }
  FLASHCORE_RETURN_IF_ERROR(check_dims("v_cache", params.v_cache, {k.shape[0], k.shape[1], k.shape[2], k.shape[3]}, dims));
  if (p->paged) {
    FLASHCORE_RETURN_IF_ERROR(
        check_tensor("block_table", params.block_table, 2, "(batch, max_pages)", DType::kInt32, a.device));
    FLASHCORE_RETURN_IF_ERROR(check_dims("block_table", params.block_table, {a.batch, -1}, "(batch, max_pages)"));
    if (params.cache_batch_idx.present()) {
      return fail("cache_batch_idx", "is for contiguous caches; a paged cache (block_table given) maps sequences "
                                     "to pages through block_table");
    }
    p->num_pages = k.shape[0];
    p->page_size = k.shape[1];
    p->max_pages = params.block_table.shape[1];
    if (__builtin_mul_overflow(p->max_pages, p->page_size, &p->capacity) || p->capacity > (std::int64_t{1} << 31) - 1) {
      return fail("block_table", "max_pages * page_size must stay below 2^31 positions");
    }
  } else {
    p->batch_cache = k.shape[0];
    p->seqlen_cache = k.shape[1];
    p->capacity = p->seqlen_cache;
    if (!params.cache_batch_idx.present() && p->batch_cache < a.batch) {
      return fail("k_cache", "batch_cache " + str(p->batch_cache) + " is smaller than q's batch " + str(a.batch) +
                                 " (pass cache_batch_idx to map sequences to cache rows)");
    }
    if (p->capacity > (std::int64_t{1} << 31) - 1) return fail("k_cache", "seqlen_cache must stay below 2^31");
  }
  return Status::Ok();
}

Status check_new_and_rotary(const KvCacheParams& params, KvCacheProblem* p) {
  const AttentionProblem& a = p->attn;
  if (params.k_new.present() != params.v_new.present()) {
    return fail(params.k_new.present() ? "v_new" : "k_new", "k_new and v_new must be given together");
  }
  if (params.k_new.present()) {
    FLASHCORE_RETURN_IF_ERROR(check_tensor("k_new", params.k_new, 4, kNewDims, a.dtype, a.device));
    FLASHCORE_RETURN_IF_ERROR(check_dims("k_new", params.k_new, {a.batch, -1, a.heads_kv, a.head_dim}, kNewDims));
    p->seqlen_new = params.k_new.shape[1];
    FLASHCORE_RETURN_IF_ERROR(check_tensor("v_new", params.v_new, 4, kNewDims, a.dtype, a.device));
    FLASHCORE_RETURN_IF_ERROR(
        check_dims("v_new", params.v_new, {a.batch, p->seqlen_new, a.heads_kv, a.head_dim}, kNewDims));
  }
  if (params.rotary_cos.present() != params.rotary_sin.present()) {
    return fail(params.rotary_cos.present() ? "rotary_sin" : "rotary_cos",
                "rotary_cos and rotary_sin must be given together");
  }
  if (params.rotary_cos.present()) {
    if (!p->has_new()) {
      return fail("rotary_cos", "rotary embedding needs the new keys (k_new and v_new) it rotates, as in flash_attn");
    }
    const char* dims = "(seqlen_ro, rotary_dim / 2)";
    FLASHCORE_RETURN_IF_ERROR(check_tensor("rotary_cos", params.rotary_cos, 2, dims, a.dtype, a.device));
    FLASHCORE_RETURN_IF_ERROR(check_tensor("rotary_sin", params.rotary_sin, 2, dims, a.dtype, a.device));
    FLASHCORE_RETURN_IF_ERROR(
        check_dims("rotary_sin", params.rotary_sin, {params.rotary_cos.shape[0], params.rotary_cos.shape[1]}, dims));
    p->seqlen_ro = params.rotary_cos.shape[0];
    p->rotary_dim = 2 * params.rotary_cos.shape[1];
    if (p->rotary_dim > a.head_dim) {
      return fail("rotary_cos", "rotary_dim (2 * " + str(params.rotary_cos.shape[1]) + ") must be at most head_dim " +
                                    str(a.head_dim));
    }
    p->rotary_interleaved = params.rotary_interleaved;
  }
  return Status::Ok();
}

}  // namespace

Status validate_kvcache(const KvCacheParams& params, KvCacheProblem* problem) {
  KvCacheProblem& p = *problem;
  AttentionProblem& a = p.attn;
  FLASHCORE_RETURN_IF_ERROR(validate_layout(kFn, "q", params.q, 4, kQDims));
  if (params.q.dtype != DType::kFloat16 && params.q.dtype != DType::kBFloat16) {
    return fail("q", std::string("expected dtype float16 or bfloat16, got ") + dtype_name(params.q.dtype));
  }
  a.batch = params.q.shape[0];
  a.seqlen_q = params.q.shape[1];
  a.heads_q = params.q.shape[2];
  a.head_dim = params.q.shape[3];
  a.dtype = params.q.dtype;
  a.device = params.q.device;
  a.causal = params.causal;
  if (a.head_dim > kMaxHeadDim) return fail("q", "head_dim must be at most " + str(kMaxHeadDim) + ", got " + str(a.head_dim));
  FLASHCORE_RETURN_IF_ERROR(check_caches(params, &p));
  FLASHCORE_RETURN_IF_ERROR(check_new_and_rotary(params, &p));
  FLASHCORE_RETURN_IF_ERROR(check_index_vector("cache_seqlens", params.cache_seqlens, a));
  FLASHCORE_RETURN_IF_ERROR(check_index_vector("cache_batch_idx", params.cache_batch_idx, a));
  FLASHCORE_RETURN_IF_ERROR(check_index_vector("cache_leftpad", params.cache_leftpad, a));

  FLASHCORE_RETURN_IF_ERROR(validate_layout(kFn, "out", params.out, 4, kQDims));
  FLASHCORE_RETURN_IF_ERROR(check_like("out", params.out, a.dtype, a.device));
  FLASHCORE_RETURN_IF_ERROR(check_dims("out", params.out, {a.batch, a.seqlen_q, a.heads_q, a.head_dim}, kQDims));
  if (params.lse.present()) {
    FLASHCORE_RETURN_IF_ERROR(
        check_tensor("lse", params.lse, 3, "(batch, heads_q, seqlen_q)", DType::kFloat32, a.device));
    FLASHCORE_RETURN_IF_ERROR(check_dims("lse", params.lse, {a.batch, a.heads_q, a.seqlen_q}, "(batch, heads_q, seqlen_q)"));
  }

  if (params.softmax_scale && !std::isfinite(*params.softmax_scale)) {
    return fail("softmax_scale", "must be finite, got " + std::to_string(*params.softmax_scale));
  }
  a.softmax_scale = params.softmax_scale ? *params.softmax_scale : 1.0f / std::sqrt(static_cast<float>(a.head_dim));
  a.seqlen_k = p.capacity;
  FLASHCORE_RETURN_IF_ERROR(validate_score_options(kFn, params.window_left, params.window_right, params.softcap,
                                                   params.alibi_slopes, &a));
  p.rotate_q_per_row = a.causal || a.has_window();
  if (params.num_splits < 0) return fail("num_splits", "must be >= 0 (0: chosen by the heuristic), got " + str(params.num_splits));
  p.num_splits = params.num_splits;
  if (params.num_threads < 0) return fail("num_threads", "must be >= 0 (0 = all hardware threads)");
  return resolve_backend(params.backend, params.kernels, &a);
}

void fill_default_indices(const KvCacheParams& params, const KvCacheProblem& p, KvCacheIndices* indices) {
  const auto n = static_cast<size_t>(p.attn.batch);
  if (!params.cache_seqlens.present()) indices->cache_seqlens.assign(n, static_cast<std::int32_t>(p.capacity));
  if (!params.cache_batch_idx.present()) {
    indices->cache_batch_idx.resize(n);
    for (size_t b = 0; b < n; ++b) indices->cache_batch_idx[b] = static_cast<std::int32_t>(b);
  }
  if (!params.cache_leftpad.present()) indices->cache_leftpad.assign(n, 0);
}

void read_host_indices(const KvCacheParams& params, const KvCacheProblem& p, KvCacheIndices* indices) {
  const auto read_vector = [&](const TensorView& t, std::vector<std::int32_t>* out) {
    if (!t.present()) return;
    out->resize(static_cast<size_t>(t.shape[0]));
    for (std::int64_t i = 0; i < t.shape[0]; ++i) (*out)[i] = static_cast<const std::int32_t*>(t.data)[i * t.stride[0]];
  };
  read_vector(params.cache_seqlens, &indices->cache_seqlens);
  read_vector(params.cache_batch_idx, &indices->cache_batch_idx);
  read_vector(params.cache_leftpad, &indices->cache_leftpad);
  if (p.paged) {
    const TensorView& t = params.block_table;
    indices->block_table.resize(static_cast<size_t>(t.shape[0] * t.shape[1]));
    for (std::int64_t b = 0; b < t.shape[0]; ++b)
      for (std::int64_t j = 0; j < t.shape[1]; ++j)
        indices->block_table[b * t.shape[1] + j] = static_cast<const std::int32_t*>(t.data)[b * t.stride[0] + j * t.stride[1]];
  }
  fill_default_indices(params, p, indices);
}

Status check_kvcache_indices(const KvCacheProblem& p, const KvCacheIndices& x) {
  const std::int64_t batch = p.attn.batch;
  std::vector<bool> row_used(static_cast<size_t>(p.paged ? 0 : p.batch_cache), false);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::string seq = " (sequence " + str(b) + ")";
    const std::int64_t len = x.cache_seqlens[b];
    const std::int64_t pad = x.cache_leftpad[b];
    if (len < 0) return fail("cache_seqlens", "must be >= 0, got " + str(len) + seq);
    if (len + p.seqlen_new > p.capacity) {
      // A paged cache's capacity is block_table's: say so, as flash_attn does (its callers match on it).
      const std::string holds = p.paged ? "the " + str(p.capacity) + " positions block_table maps (" + str(p.max_pages) +
                                              " pages of " + str(p.page_size) + ")"
                                        : "the cache's " + str(p.capacity) + " positions";
      return fail("cache_seqlens", "cache_seqlens + seqlen_new = " + str(len) + " + " + str(p.seqlen_new) +
                                       " exceeds " + holds + seq);
    }
    if (pad < 0 || pad > len) {
      return fail("cache_leftpad", "must be in [0, cache_seqlens] = [0, " + str(len) + "], got " + str(pad) + seq);
    }
    // The new keys sit at positions len .. len + seqlen_new - 1; q rows at len + i (per row) or len.
    const std::int64_t last_position =
        std::max(len + p.seqlen_new, len + (p.rotate_q_per_row ? p.attn.seqlen_q : 1)) - 1;
    if (p.rotary_dim > 0 && last_position >= p.seqlen_ro) {
      return fail("rotary_cos", "has " + str(p.seqlen_ro) + " positions, but sequence " + str(b) + " reaches position " +
                                    str(last_position));
    }
    if (p.paged) {
      const std::int64_t end = len + p.seqlen_new;
      for (std::int64_t page = pad / p.page_size; page * p.page_size < end; ++page) {
        const std::int64_t id = x.block_table[b * p.max_pages + page];
        if (id < 0 || id >= p.num_pages) {
          return fail("block_table", "page id " + str(id) + " at [" + str(b) + ", " + str(page) +
                                         "] is outside [0, num_pages = " + str(p.num_pages) + ")");
        }
      }
    } else {
      const std::int64_t row = x.cache_batch_idx[b];
      if (row < 0 || row >= p.batch_cache) {
        return fail("cache_batch_idx", "value " + str(row) + " is outside [0, batch_cache = " + str(p.batch_cache) + ")" + seq);
      }
      if (p.has_new() && row_used[row]) {
        return fail("cache_batch_idx", "value " + str(row) + " is repeated; with k_new each sequence must append to a "
                                       "cache row of its own" + seq);
      }
      row_used[row] = true;
    }
  }
  return Status::Ok();
}

}  // namespace flashcore::detail
