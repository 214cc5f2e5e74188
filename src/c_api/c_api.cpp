// The C ABI (flashcore/c_api.h): converts its plain structs to the C++ API's params, calls it, and
// turns the Status into a return code plus a per-thread message. No logic of its own beyond that.
#include "flashcore/c_api.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <string>
#include <utility>

#include "flashcore/flashcore.h"

// The C codes are the C++ enums' values, so conversion is a cast.
static_assert(FLASHCORE_DTYPE_FLOAT16 == static_cast<int>(flashcore::DType::kFloat16) &&
              FLASHCORE_DTYPE_BFLOAT16 == static_cast<int>(flashcore::DType::kBFloat16) &&
              FLASHCORE_DTYPE_FLOAT32 == static_cast<int>(flashcore::DType::kFloat32) &&
              FLASHCORE_DTYPE_INT32 == static_cast<int>(flashcore::DType::kInt32));
static_assert(FLASHCORE_DEVICE_CPU == static_cast<int>(flashcore::Device::kCPU) &&
              FLASHCORE_DEVICE_CUDA == static_cast<int>(flashcore::Device::kCUDA));
static_assert(FLASHCORE_BACKEND_AUTO == static_cast<int>(flashcore::Backend::kAuto) &&
              FLASHCORE_BACKEND_CPU == static_cast<int>(flashcore::Backend::kCpu) &&
              FLASHCORE_BACKEND_CPU_REFERENCE == static_cast<int>(flashcore::Backend::kCpuReference) &&
              FLASHCORE_BACKEND_CUDA == static_cast<int>(flashcore::Backend::kCuda));
static_assert(FLASHCORE_STATUS_OK == static_cast<int>(flashcore::StatusCode::kOk) &&
              FLASHCORE_STATUS_INVALID_ARGUMENT == static_cast<int>(flashcore::StatusCode::kInvalidArgument) &&
              FLASHCORE_STATUS_NOT_SUPPORTED == static_cast<int>(flashcore::StatusCode::kNotSupported) &&
              FLASHCORE_STATUS_CUDA_ERROR == static_cast<int>(flashcore::StatusCode::kCudaError) &&
              FLASHCORE_STATUS_INTERNAL == static_cast<int>(flashcore::StatusCode::kInternal));
static_assert(FLASHCORE_MAX_RANK == flashcore::kMaxRank);
static_assert(FLASHCORE_KERNELS_AUTO == static_cast<int>(flashcore::KernelFamily::kAuto) &&
              FLASHCORE_KERNELS_SM80 == static_cast<int>(flashcore::KernelFamily::kSm80) &&
              FLASHCORE_KERNELS_SM90 == static_cast<int>(flashcore::KernelFamily::kSm90));

namespace {

using flashcore::Status;
using flashcore::TensorView;

// The last call's message, per thread so that concurrent callers never read each other's errors.
thread_local std::string last_error;

int finish(const Status& status) {
  if (status.ok()) {
    last_error.clear();
    return FLASHCORE_STATUS_OK;
  }
  last_error = status.message();
  return static_cast<int>(status.code());
}

// Runs `call` (returning a Status), keeping C++ exceptions (std::bad_alloc, a thread that failed to
// start) from unwinding into a C caller.
template <typename Call>
int guarded(const char* function, Call&& call) {
  try {
    return finish(call());
  } catch (const std::exception& e) {
    return finish(Status::Internal(std::string(function) + ": " + e.what()));
  } catch (...) {
    return finish(Status::Internal(std::string(function) + ": unknown C++ exception"));
  }
}

Status invalid(const char* function, const char* name, const std::string& what) {
  return Status::InvalidArgument(std::string(function) + ": " + name + ": " + what);
}

// Checks what the C struct can hold but the C++ enums and arrays cannot (codes out of range, a rank
// past kMaxRank), then copies it. A null `tensor` is an absent view; the C++ validation decides
// whether that is allowed and says so naming the argument.
Status to_view(const char* function, const char* name, const flashcore_tensor* tensor, TensorView* view) {
  *view = TensorView{};
  if (tensor == nullptr) return Status::Ok();
  if (tensor->dtype < FLASHCORE_DTYPE_FLOAT16 || tensor->dtype > FLASHCORE_DTYPE_INT32) {
    return invalid(function, name,
                   "unknown dtype code " + std::to_string(tensor->dtype) +
                       " (expected 0 = float16, 1 = bfloat16, 2 = float32 or 3 = int32)");
  }
  if (tensor->device != FLASHCORE_DEVICE_CPU && tensor->device != FLASHCORE_DEVICE_CUDA) {
    return invalid(function, name,
                   "unknown device code " + std::to_string(tensor->device) + " (expected 0 = cpu or 1 = cuda)");
  }
  if (tensor->rank < 0 || tensor->rank > FLASHCORE_MAX_RANK) {
    return invalid(function, name,
                   "rank " + std::to_string(tensor->rank) + " is outside 0.." + std::to_string(FLASHCORE_MAX_RANK));
  }
  view->data = tensor->data;
  view->dtype = static_cast<flashcore::DType>(tensor->dtype);
  view->device = static_cast<flashcore::Device>(tensor->device);
  view->rank = tensor->rank;
  for (int i = 0; i < tensor->rank; ++i) {
    view->shape[i] = tensor->shape[i];
    view->stride[i] = tensor->stride[i];
  }
  return Status::Ok();
}

Status to_backend(const char* function, int backend, flashcore::Backend* out) {
  if (backend < FLASHCORE_BACKEND_AUTO || backend > FLASHCORE_BACKEND_CUDA) {
    return invalid(function, "backend",
                   "unknown backend code " + std::to_string(backend) +
                       " (expected 0 = auto, 1 = cpu, 2 = cpu_reference or 3 = cuda)");
  }
  *out = static_cast<flashcore::Backend>(backend);
  return Status::Ok();
}

#define FLASHCORE_C_RETURN_IF_ERROR(expr) \
  do {                                    \
    Status status_ = (expr);              \
    if (!status_.ok()) return status_;    \
  } while (0)

// The caller's options, read up to the size it was compiled with; fields past that keep their
// defaults (an older caller never sees an option added after it was built).
Status read_options(const char* function, const flashcore_options* given, flashcore_options* options) {
  flashcore_options_init(options);
  if (given == nullptr) return Status::Ok();
  constexpr std::size_t kMinSize = offsetof(flashcore_options, has_softmax_scale) + sizeof(std::int32_t);
  if (given->struct_size < kMinSize) {
    return invalid(function, "options",
                   "struct_size is " + std::to_string(given->struct_size) + "; call flashcore_options_init first");
  }
  std::memcpy(options, given, std::min(given->struct_size, sizeof(flashcore_options)));
  options->struct_size = sizeof(flashcore_options);
  return Status::Ok();
}

// The option fields every call shares, onto the C++ params (ForwardParams or BackwardParams).
template <class Params>
Status apply_options(const char* function, const flashcore_options& o, Params* params) {
  FLASHCORE_C_RETURN_IF_ERROR(to_backend(function, o.backend, &params->backend));
  if (o.kernels < FLASHCORE_KERNELS_AUTO || o.kernels > FLASHCORE_KERNELS_SM90) {
    return invalid(function, "kernels",
                   "unknown kernel family code " + std::to_string(o.kernels) + " (expected 0 = auto, 1 = sm80 or 2 = sm90)");
  }
  params->kernels = static_cast<flashcore::KernelFamily>(o.kernels);
  // The C++ validation rejects a non-finite scale, naming softmax_scale.
  if (o.has_softmax_scale != 0) params->softmax_scale = o.softmax_scale;
  params->causal = o.causal != 0;
  params->stream = o.stream;
  params->num_threads = o.num_threads;
  // The C++ validation checks the values, naming window_size, softcap and alibi_slopes.
  params->window_left = o.window_left;
  params->window_right = o.window_right;
  params->softcap = o.softcap;
  return to_view(function, "alibi_slopes", o.alibi_slopes, &params->alibi_slopes);
}

// Variable-length batches (forward and backward only).
template <class Params>
Status apply_varlen_options(const char* function, const flashcore_options& o, Params* params) {
  params->max_seqlen_q = o.max_seqlen_q;
  params->max_seqlen_k = o.max_seqlen_k;
  // Dropout travels with the forward and backward only; the C++ validation checks dropout_p.
  params->dropout_p = o.dropout_p;
  params->dropout_seed = o.dropout_seed;
  params->dropout_offset = o.dropout_offset;
  FLASHCORE_C_RETURN_IF_ERROR(to_view(function, "cu_seqlens_q", o.cu_seqlens_q, &params->cu_seqlens_q));
  return to_view(function, "cu_seqlens_k", o.cu_seqlens_k, &params->cu_seqlens_k);
}

Status to_forward_params(const char* function, const flashcore_tensor* q, const flashcore_tensor* k,
                         const flashcore_tensor* v, const flashcore_tensor* out, const flashcore_tensor* lse,
                         const flashcore_options* given, flashcore::ForwardParams* params) {
  flashcore_options options;
  FLASHCORE_C_RETURN_IF_ERROR(read_options(function, given, &options));
  FLASHCORE_C_RETURN_IF_ERROR(to_view(function, "q", q, &params->q));
  FLASHCORE_C_RETURN_IF_ERROR(to_view(function, "k", k, &params->k));
  FLASHCORE_C_RETURN_IF_ERROR(to_view(function, "v", v, &params->v));
  FLASHCORE_C_RETURN_IF_ERROR(to_view(function, "out", out, &params->out));
  FLASHCORE_C_RETURN_IF_ERROR(to_view(function, "lse", lse, &params->lse));
  FLASHCORE_C_RETURN_IF_ERROR(apply_options(function, options, params));
  FLASHCORE_C_RETURN_IF_ERROR(to_view(function, "block_table", options.block_table, &params->block_table));
  return apply_varlen_options(function, options, params);
}

// block_table in the options of a call that takes no pages.
Status refuse_block_table(const char* function, const flashcore_options& o, const char* why) {
  if (o.block_table == nullptr || o.block_table->data == nullptr) return Status::Ok();
  return invalid(function, "block_table", why);
}

Status to_backward_params(const char* function, const flashcore_tensor* q, const flashcore_tensor* k,
                          const flashcore_tensor* v, const flashcore_tensor* out, const flashcore_tensor* dout,
                          const flashcore_tensor* lse, const flashcore_tensor* dq, const flashcore_tensor* dk,
                          const flashcore_tensor* dv, const flashcore_options* given,
                          flashcore::BackwardParams* params) {
  flashcore_options options;
  FLASHCORE_C_RETURN_IF_ERROR(read_options(function, given, &options));
  FLASHCORE_C_RETURN_IF_ERROR(to_view(function, "q", q, &params->q));
  FLASHCORE_C_RETURN_IF_ERROR(to_view(function, "k", k, &params->k));
  FLASHCORE_C_RETURN_IF_ERROR(to_view(function, "v", v, &params->v));
  FLASHCORE_C_RETURN_IF_ERROR(to_view(function, "out", out, &params->out));
  FLASHCORE_C_RETURN_IF_ERROR(to_view(function, "dout", dout, &params->dout));
  FLASHCORE_C_RETURN_IF_ERROR(to_view(function, "lse", lse, &params->lse));
  FLASHCORE_C_RETURN_IF_ERROR(to_view(function, "dq", dq, &params->dq));
  FLASHCORE_C_RETURN_IF_ERROR(to_view(function, "dk", dk, &params->dk));
  FLASHCORE_C_RETURN_IF_ERROR(to_view(function, "dv", dv, &params->dv));
  FLASHCORE_C_RETURN_IF_ERROR(apply_options(function, options, params));
  FLASHCORE_C_RETURN_IF_ERROR(apply_varlen_options(function, options, params));
  FLASHCORE_C_RETURN_IF_ERROR(refuse_block_table(function, options, "the backward takes no paged keys and values "
                                                                    "(flash_attn's paged varlen call is forward only)"));
  params->deterministic = options.deterministic != 0;
  params->workspace = options.workspace;
  params->workspace_bytes = options.workspace_bytes;
  return Status::Ok();
}

}  // namespace

extern "C" {

int flashcore_c_abi_version(void) { return FLASHCORE_C_ABI_VERSION; }

const char* flashcore_version(void) { return FLASHCORE_VERSION_STRING; }

int flashcore_built_with_cuda(void) { return flashcore::built_with_cuda() ? 1 : 0; }

const char* flashcore_kernel_families(void) { return flashcore::build_info().kernel_families; }

const char* flashcore_cuda_architectures(void) { return flashcore::build_info().cuda_architectures; }

const char* flashcore_cuda_version(void) { return flashcore::build_info().cuda_version; }

const char* flashcore_last_error(void) { return last_error.c_str(); }

int flashcore_cpu_use_openmp(const char* runtime_library) {
  return guarded("flashcore_cpu_use_openmp", [&] { return flashcore::use_openmp_threads(runtime_library); });
}

void flashcore_options_init(flashcore_options* options) {
  if (options == nullptr) return;
  std::memset(options, 0, sizeof(*options));
  options->struct_size = sizeof(*options);
  options->window_left = -1;
  options->window_right = -1;
}

int flashcore_forward(const flashcore_tensor* q, const flashcore_tensor* k, const flashcore_tensor* v,
                      const flashcore_tensor* out, const flashcore_tensor* lse, const flashcore_options* options) {
  constexpr const char* kFunction = "flashcore_forward";
  return guarded(kFunction, [&]() -> Status {
    flashcore::ForwardParams params;
    FLASHCORE_C_RETURN_IF_ERROR(to_forward_params(kFunction, q, k, v, out, lse, options, &params));
    return flashcore::forward(params);
  });
}

int flashcore_backward_workspace_size(const flashcore_tensor* q, const flashcore_tensor* k,
                                      const flashcore_tensor* v, const flashcore_tensor* out,
                                      const flashcore_tensor* dout, const flashcore_tensor* lse,
                                      const flashcore_tensor* dq, const flashcore_tensor* dk,
                                      const flashcore_tensor* dv, const flashcore_options* options, size_t* bytes) {
  constexpr const char* kFunction = "flashcore_backward_workspace_size";
  return guarded(kFunction, [&]() -> Status {
    if (bytes == nullptr) return invalid(kFunction, "bytes", "is null");
    flashcore::BackwardParams params;
    FLASHCORE_C_RETURN_IF_ERROR(to_backward_params(kFunction, q, k, v, out, dout, lse, dq, dk, dv, options, &params));
    std::size_t needed = 0;
    FLASHCORE_C_RETURN_IF_ERROR(flashcore::backward_workspace_size(params, &needed));
    *bytes = needed;
    return Status::Ok();
  });
}

int flashcore_backward(const flashcore_tensor* q, const flashcore_tensor* k, const flashcore_tensor* v,
                       const flashcore_tensor* out, const flashcore_tensor* dout, const flashcore_tensor* lse,
                       const flashcore_tensor* dq, const flashcore_tensor* dk, const flashcore_tensor* dv,
                       const flashcore_options* options) {
  constexpr const char* kFunction = "flashcore_backward";
  return guarded(kFunction, [&]() -> Status {
    flashcore::BackwardParams params;
    FLASHCORE_C_RETURN_IF_ERROR(to_backward_params(kFunction, q, k, v, out, dout, lse, dq, dk, dv, options, &params));
    return flashcore::backward(params);
  });
}

void flashcore_kvcache_options_init(flashcore_kvcache_options* options) {
  if (options == nullptr) return;
  std::memset(options, 0, sizeof(*options));
  options->struct_size = sizeof(*options);
  options->rotary_interleaved = 1;
  options->check_indices = 1;
}

int flashcore_forward_kvcache(const flashcore_tensor* q, const flashcore_tensor* k_cache,
                              const flashcore_tensor* v_cache, const flashcore_tensor* k_new,
                              const flashcore_tensor* v_new, const flashcore_tensor* rotary_cos,
                              const flashcore_tensor* rotary_sin, const flashcore_tensor* cache_seqlens,
                              const flashcore_tensor* cache_batch_idx, const flashcore_tensor* cache_leftpad,
                              const flashcore_tensor* block_table, const flashcore_tensor* out,
                              const flashcore_tensor* lse, const flashcore_options* options,
                              const flashcore_kvcache_options* kvcache_options) {
  constexpr const char* kFunction = "flashcore_forward_kvcache";
  return guarded(kFunction, [&]() -> Status {
    flashcore::KvCacheParams params;
    flashcore_options o;
    FLASHCORE_C_RETURN_IF_ERROR(read_options(kFunction, options, &o));
    flashcore_kvcache_options kv;
    flashcore_kvcache_options_init(&kv);
    if (kvcache_options != nullptr) {
      if (kvcache_options->struct_size < sizeof(size_t)) {
        return invalid(kFunction, "kvcache_options", "struct_size is " + std::to_string(kvcache_options->struct_size) +
                                                         "; call flashcore_kvcache_options_init first");
      }
      std::memcpy(&kv, kvcache_options, std::min(kvcache_options->struct_size, sizeof(kv)));
    }
    const std::pair<const char*, std::pair<const flashcore_tensor*, TensorView*>> views[] = {
        {"q", {q, &params.q}},
        {"k_cache", {k_cache, &params.k_cache}},
        {"v_cache", {v_cache, &params.v_cache}},
        {"k_new", {k_new, &params.k_new}},
        {"v_new", {v_new, &params.v_new}},
        {"rotary_cos", {rotary_cos, &params.rotary_cos}},
        {"rotary_sin", {rotary_sin, &params.rotary_sin}},
        {"cache_seqlens", {cache_seqlens, &params.cache_seqlens}},
        {"cache_batch_idx", {cache_batch_idx, &params.cache_batch_idx}},
        {"cache_leftpad", {cache_leftpad, &params.cache_leftpad}},
        {"block_table", {block_table, &params.block_table}},
        {"out", {out, &params.out}},
        {"lse", {lse, &params.lse}},
    };
    for (const auto& [name, pair] : views) FLASHCORE_C_RETURN_IF_ERROR(to_view(kFunction, name, pair.first, pair.second));
    FLASHCORE_C_RETURN_IF_ERROR(apply_options(kFunction, o, &params));
    FLASHCORE_C_RETURN_IF_ERROR(refuse_block_table(kFunction, o, "pass the cache's block_table as the argument, "
                                                                 "not in the options"));
    if (o.cu_seqlens_q != nullptr || o.cu_seqlens_k != nullptr) {
      return invalid(kFunction, "cu_seqlens_q", "variable-length batches are not an option of the KV-cache forward "
                                                "(cache_seqlens gives each sequence's length)");
    }
    params.rotary_interleaved = kv.rotary_interleaved != 0;
    params.num_splits = kv.num_splits;
    params.check_indices = kv.check_indices != 0;
    return flashcore::forward_kvcache(params);
  });
}

int flashcore_selected_kernels(const flashcore_tensor* q, const flashcore_tensor* k, const flashcore_tensor* v,
                               const flashcore_tensor* out, const flashcore_tensor* dout, const flashcore_tensor* lse,
                               const flashcore_tensor* dq, const flashcore_tensor* dk, const flashcore_tensor* dv,
                               int backward, const flashcore_options* options, int32_t* family) {
  constexpr const char* kFunction = "flashcore_selected_kernels";
  return guarded(kFunction, [&]() -> Status {
    if (family == nullptr) return invalid(kFunction, "family", "is null");
    flashcore::KernelFamily chosen = flashcore::KernelFamily::kAuto;
    if (backward != 0) {
      flashcore::BackwardParams params;
      FLASHCORE_C_RETURN_IF_ERROR(
          to_backward_params(kFunction, q, k, v, out, dout, lse, dq, dk, dv, options, &params));
      FLASHCORE_C_RETURN_IF_ERROR(flashcore::selected_kernels(params, &chosen));
    } else {
      flashcore::ForwardParams params;
      FLASHCORE_C_RETURN_IF_ERROR(to_forward_params(kFunction, q, k, v, out, lse, options, &params));
      FLASHCORE_C_RETURN_IF_ERROR(flashcore::selected_kernels(params, &chosen));
    }
    *family = static_cast<int32_t>(chosen);
    return Status::Ok();
  });
}

int flashcore_merge_partials(const flashcore_tensor* out_a, const flashcore_tensor* lse_a,
                             const flashcore_tensor* out_b, const flashcore_tensor* lse_b, const flashcore_tensor* out,
                             const flashcore_tensor* lse, const flashcore_options* options) {
  constexpr const char* kFunction = "flashcore_merge_partials";
  return guarded(kFunction, [&]() -> Status {
    flashcore_options o;
    FLASHCORE_C_RETURN_IF_ERROR(read_options(kFunction, options, &o));
    flashcore::MergeParams params;
    FLASHCORE_C_RETURN_IF_ERROR(to_view(kFunction, "out_a", out_a, &params.out_a));
    FLASHCORE_C_RETURN_IF_ERROR(to_view(kFunction, "lse_a", lse_a, &params.lse_a));
    FLASHCORE_C_RETURN_IF_ERROR(to_view(kFunction, "out_b", out_b, &params.out_b));
    FLASHCORE_C_RETURN_IF_ERROR(to_view(kFunction, "lse_b", lse_b, &params.lse_b));
    FLASHCORE_C_RETURN_IF_ERROR(to_view(kFunction, "out", out, &params.out));
    FLASHCORE_C_RETURN_IF_ERROR(to_view(kFunction, "lse", lse, &params.lse));
    FLASHCORE_C_RETURN_IF_ERROR(to_backend(kFunction, o.backend, &params.backend));
    params.stream = o.stream;
    params.num_threads = o.num_threads;
    return flashcore::merge_partials(params);
  });
}

}  // extern "C"
