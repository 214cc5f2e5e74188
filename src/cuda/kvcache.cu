// flashcore::cuda::forward_kvcache: checks what only the CUDA path needs (device pointers), sends
// calls the decode kernels cannot read in place (a head dim that is not a multiple of 8, cache or
// output rows not 16-byte aligned) to the staged path (kvcache_staging.cu), fills the arch-neutral
// DecodeParams and launches the decode kernels dispatch.cu picks. And the copy of the index tensors
// to the host for the API's checks.
#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "api/cuda_backend.h"
#include "cuda/common/cuda_check.h"
#include "cuda/device.h"
#include "cuda/dispatch.h"
#include "cuda/kvcache_launch.h"
#include "cuda/staging.h"

namespace flashcore::cuda {
namespace {

constexpr const char* kFn = "flashcore::forward_kvcache";

TensorStrides strides_of(const TensorView& t) { return {t.stride[0], t.stride[1], t.stride[2]}; }

Status copy_vector(const TensorView& t, std::vector<std::int32_t>* out, cudaStream_t stream) {
  if (!t.present()) return Status::Ok();
  // A strided vector: copy the span, then pick the elements.
  const std::int64_t span = (t.shape[0] - 1) * t.stride[0] + 1;
  std::vector<std::int32_t> raw(static_cast<size_t>(span));
  FLASHCORE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(raw.data(), t.data, raw.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  out->resize(static_cast<size_t>(t.shape[0]));
  for (std::int64_t i = 0; i < t.shape[0]; ++i) (*out)[i] = raw[i * t.stride[0]];
  return Status::Ok();
}

// The sm80 decode row kernels=sm80 would pick for `a` (null: none in this build), looked up once
// per (device, dtype, head dim, options): the only parts of the problem the choice depends on once
// the problem passed the same dispatch's limits for the newer family (a decode call is a few us,
// issue 14's latency regime).
DecodeLauncher sm80_decode_fallback(const detail::AttentionProblem& a, const DeviceInfo& device) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, std::int64_t, unsigned>, DecodeLauncher> rows;
  const auto key = std::make_tuple(device.ordinal, static_cast<int>(a.dtype), a.head_dim, problem_options(a));
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto found = rows.find(key); found != rows.end()) return found->second;
  const DecodeKernel* older = nullptr;
  const DecodeLauncher launch =
      select_decode_kernel(kFn, a, KernelFamily::kSm80, device, &older).ok() ? older->launch : nullptr;
  rows.emplace(key, launch);
  return launch;
}

}  // namespace

Status copy_kvcache_indices(const KvCacheParams& params, const detail::KvCacheProblem& p,
                            detail::KvCacheIndices* indices) {
  DeviceInfo device;
  FLASHCORE_RETURN_IF_ERROR(current_device(kFn, &device));
  FLASHCORE_RETURN_IF_ERROR(check_device_pointers(kFn, device,
                                                  {{"cache_seqlens", &params.cache_seqlens},
                                                   {"cache_batch_idx", &params.cache_batch_idx},
                                                   {"cache_leftpad", &params.cache_leftpad},
                                                   {"block_table", &params.block_table}}));
  const auto stream = static_cast<cudaStream_t>(params.stream);
  FLASHCORE_RETURN_IF_ERROR(copy_vector(params.cache_seqlens, &indices->cache_seqlens, stream));
  FLASHCORE_RETURN_IF_ERROR(copy_vector(params.cache_batch_idx, &indices->cache_batch_idx, stream));
  FLASHCORE_RETURN_IF_ERROR(copy_vector(params.cache_leftpad, &indices->cache_leftpad, stream));
  if (p.paged) {
    const TensorView& t = params.block_table;
    const std::int64_t span = (t.shape[0] - 1) * t.stride[0] + (t.shape[1] - 1) * t.stride[1] + 1;
    std::vector<std::int32_t> raw(static_cast<size_t>(span));
    FLASHCORE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(raw.data(), t.data, raw.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
    FLASHCORE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    indices->block_table.resize(static_cast<size_t>(t.shape[0] * t.shape[1]));
    for (std::int64_t b = 0; b < t.shape[0]; ++b)
      for (std::int64_t j = 0; j < t.shape[1]; ++j) indices->block_table[b * t.shape[1] + j] = raw[b * t.stride[0] + j * t.stride[1]];
  }
  detail::fill_default_indices(params, p, indices);
  return Status::Ok();
}

Status forward_kvcache(const KvCacheParams& params, const detail::KvCacheProblem& p,
                       const detail::KvCacheIndices* indices) {
  DeviceInfo device;
  FLASHCORE_RETURN_IF_ERROR(current_device(kFn, &device));
  FLASHCORE_RETURN_IF_ERROR(check_device_pointers(
      kFn, device,
      {{"q", &params.q}, {"k_cache", &params.k_cache}, {"v_cache", &params.v_cache}, {"k_new", &params.k_new},
       {"v_new", &params.v_new}, {"rotary_cos", &params.rotary_cos}, {"rotary_sin", &params.rotary_sin},
       {"cache_seqlens", &params.cache_seqlens}, {"cache_batch_idx", &params.cache_batch_idx},
       {"cache_leftpad", &params.cache_leftpad}, {"block_table", &params.block_table}, {"out", &params.out},
       {"lse", &params.lse}, {"alibi_slopes", &params.alibi_slopes}}));
  if (needs_staging(p.attn, {&params.k_cache, &params.v_cache, &params.out})) {
    return forward_kvcache_staged(params, p, indices, device);
  }
  return launch_decode(params, p, indices, device);
}

Status launch_decode(const KvCacheParams& params, const detail::KvCacheProblem& p,
                     const detail::KvCacheIndices* indices, const DeviceInfo& device) {
  const detail::AttentionProblem& a = p.attn;
  if (a.batch > 65535 || a.heads_kv * ((a.group_size() * a.seqlen_q + 3) / 4) > 65535) {
    return Status::NotSupported(std::string(kFn) + ": q: batch and heads_kv x row blocks must be at most 65535");
  }
  const DecodeKernel* kernel = nullptr;
  KernelFamily asked = KernelFamily::kAuto;  // kernels, or the family FLASHCORE_KERNELS forces
  FLASHCORE_RETURN_IF_ERROR(select_decode_kernel(kFn, a, params.kernels, device, &kernel, &asked));

  DecodeParams kp;
  static_cast<ProblemParams&>(kp) = problem_params(a, device);
  kp.q = params.q.data;
  kp.q_strides = strides_of(params.q);
  kp.k_cache = params.k_cache.data;
  kp.v_cache = params.v_cache.data;
  kp.k_cache_strides = strides_of(params.k_cache);
  kp.v_cache_strides = strides_of(params.v_cache);
  if (p.paged) {
    kp.block_table = static_cast<const int*>(params.block_table.data);
    kp.block_table_stride = params.block_table.stride[0];
    kp.page_size = static_cast<int>(p.page_size);
    kp.max_pages = static_cast<int>(p.max_pages);
    kp.num_pages = static_cast<int>(p.num_pages);
  }
  kp.batch_cache = static_cast<int>(p.batch_cache);
  kp.capacity = static_cast<int>(p.capacity);
  const auto index = [](const TensorView& t, const int** data, std::int64_t* stride) {
    if (!t.present()) return;
    *data = static_cast<const int*>(t.data);
    *stride = t.stride[0];
  };
  index(params.cache_seqlens, &kp.cache_seqlens, &kp.cache_seqlens_stride);
  index(params.cache_batch_idx, &kp.cache_batch_idx, &kp.cache_batch_idx_stride);
  index(params.cache_leftpad, &kp.cache_leftpad, &kp.cache_leftpad_stride);
  if (p.has_new()) {
    kp.k_new = params.k_new.data;
    kp.v_new = params.v_new.data;
    kp.k_new_strides = strides_of(params.k_new);
    kp.v_new_strides = strides_of(params.v_new);
    kp.seqlen_new = static_cast<int>(p.seqlen_new);
  }
  if (p.rotary_dim > 0) {
    kp.rotary_cos = params.rotary_cos.data;
    kp.rotary_sin = params.rotary_sin.data;
    kp.rotary_cos_stride = params.rotary_cos.stride[0];
    kp.rotary_sin_stride = params.rotary_sin.stride[0];
    kp.rotary_dim = static_cast<int>(p.rotary_dim);
    kp.rotary_seqlen = static_cast<int>(p.seqlen_ro);
    kp.rotary_interleaved = p.rotary_interleaved;
    kp.rotate_q_per_row = p.rotate_q_per_row;
  }
  kp.out = params.out.data;
  kp.o_strides = strides_of(params.out);
  kp.lse = static_cast<float*>(params.lse.data);
  if (params.lse.present()) kp.lse_strides = {params.lse.stride[0], params.lse.stride[1]};
  kp.num_splits = p.num_splits;
  // The heuristic sizes splits by the longest sequence when the indices were read, else by the capacity.
  std::int64_t longest = p.capacity;
  if (indices != nullptr) {
    longest = 0;
    for (std::int64_t b = 0; b < a.batch; ++b) longest = std::max(longest, indices->seqlen_k(p, b));
  }
  kp.max_seqlen_k = static_cast<int>(longest);
  if (asked == KernelFamily::kAuto && kernel->family != KernelFamily::kSm80) {
    // Under kernels=auto a newer family's launcher may hand a problem its kernels serve worse to the
    // sm80 row (sm90/decode_launch_template.h): the row kernels=sm80 would pick, if this build has
    // one. A forced family runs its own kernels only.
    kp.fallback = sm80_decode_fallback(a, device);
  }
  return kernel->launch(kp, static_cast<cudaStream_t>(params.stream));
}

}  // namespace flashcore::cuda
