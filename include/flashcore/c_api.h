/* flashcore's C ABI: the attention entry points of flashcore/attention.h as plain C functions.
 *
 * Why a C ABI: a caller in any language (Python through ctypes, Rust, Julia, C) can load
 * libflashcore_c.so and call it with pointers, shapes and strides, without sharing a C++ standard
 * library, a compiler or a framework's ABI with flashcore. The Python package uses it so that one
 * build works with every PyTorch version.
 *
 * Conventions for every function below:
 *   - Tensors are described by flashcore_tensor (a view of memory the caller owns) and passed by
 *     pointer. Layouts are FlashAttention's:
 *       q, out, dq, dout : (batch, seqlen_q, heads_q,  head_dim)
 *       k, v, dk, dv     : (batch, seqlen_k, heads_kv, head_dim)
 *       lse              : (batch, heads_q,  seqlen_q), float32, natural log
 *     Any non-negative strides (in elements) are accepted as long as head_dim is contiguous.
 *   - Semantics (softmax, causal mask aligned to the bottom-right corner when seqlen_q !=
 *     seqlen_k, GQA/MQA, fully masked rows) are those documented in flashcore/attention.h.
 *   - Every call returns a flashcore status code (FLASHCORE_STATUS_*). On failure
 *     flashcore_last_error() returns a message that names the offending argument, e.g.
 *     "flashcore::forward: k: head_dim 32 does not match q's head_dim 64". A rejected call
 *     (INVALID_ARGUMENT, NOT_SUPPORTED) has written nothing.
 *   - Calls are thread-safe; the error message is kept per thread.
 *   - CUDA calls are asynchronous on `stream` (a cudaStream_t passed as void*; NULL is the legacy
 *     default stream) and run on the calling thread's current CUDA device. They do not
 *     synchronise.
 *   - No C++ exception crosses this boundary: one escaping the library is reported as
 *     FLASHCORE_STATUS_INTERNAL.
 */
#ifndef FLASHCORE_C_API_H_
#define FLASHCORE_C_API_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define FLASHCORE_C_EXPORT __attribute__((visibility("default")))
#else
#define FLASHCORE_C_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a struct layout or a function signature below changes, so a binding can refuse
 * a library it was not written for. */
#define FLASHCORE_C_ABI_VERSION 5

/* flashcore_tensor.dtype */
enum {
  FLASHCORE_DTYPE_FLOAT16 = 0,
  FLASHCORE_DTYPE_BFLOAT16 = 1,
  FLASHCORE_DTYPE_FLOAT32 = 2, /* the LSE's type */
  FLASHCORE_DTYPE_INT32 = 3    /* index tensors: cu_seqlens, flashcore_forward_kvcache's cache_seqlens, block_table, ... */
};

/* flashcore_tensor.device */
enum { FLASHCORE_DEVICE_CPU = 0, FLASHCORE_DEVICE_CUDA = 1 };

/* The `backend` argument. AUTO follows the tensors' device: CPU tensors run on the tiled CPU
 * backend, CUDA tensors on the GPU kernels. CPU_REFERENCE is the float64 oracle (slow). */
enum {
  FLASHCORE_BACKEND_AUTO = 0,
  FLASHCORE_BACKEND_CPU = 1,
  FLASHCORE_BACKEND_CPU_REFERENCE = 2,
  FLASHCORE_BACKEND_CUDA = 3
};

/* flashcore_options.kernels: which family of GPU kernels runs CUDA tensors. AUTO takes the fastest
 * one the device serves (SM90 on compute capability 9.0 where it has the head dim, else SM80); the
 * others force one, and a call it cannot serve fails with NOT_SUPPORTED. With AUTO, the environment
 * variable FLASHCORE_KERNELS (auto, sm80, sm90) forces a family instead. */
enum { FLASHCORE_KERNELS_AUTO = 0, FLASHCORE_KERNELS_SM80 = 1, FLASHCORE_KERNELS_SM90 = 2 };

/* Return codes. */
enum {
  FLASHCORE_STATUS_OK = 0,
  FLASHCORE_STATUS_INVALID_ARGUMENT = 1, /* the caller passed something the API rejects */
  FLASHCORE_STATUS_NOT_SUPPORTED = 2,    /* valid request this build or device cannot serve */
  FLASHCORE_STATUS_CUDA_ERROR = 3,       /* the CUDA runtime reported an error */
  FLASHCORE_STATUS_INTERNAL = 4
};

#define FLASHCORE_MAX_RANK 4

/* A strided view of memory the caller owns. Entries of shape and stride past `rank` are ignored.
 * data == NULL marks an absent optional tensor (the forward's lse). */
typedef struct flashcore_tensor {
  void* data;
  int32_t dtype;  /* FLASHCORE_DTYPE_* */
  int32_t device; /* FLASHCORE_DEVICE_* */
  int32_t rank;   /* 0 .. FLASHCORE_MAX_RANK */
  int64_t shape[FLASHCORE_MAX_RANK];
  int64_t stride[FLASHCORE_MAX_RANK]; /* in elements, not bytes */
} flashcore_tensor;

/* FLASHCORE_C_ABI_VERSION of the loaded library. */
FLASHCORE_C_EXPORT int flashcore_c_abi_version(void);

/* The library's version, e.g. "0.1.0". The string is static. */
FLASHCORE_C_EXPORT const char* flashcore_version(void);

/* 1 when this build contains the CUDA backend (it still needs a GPU of compute capability >= 8.0),
 * else 0. */
FLASHCORE_C_EXPORT int flashcore_built_with_cuda(void);

/* What this build holds (flashcore/build_info.h), as static strings:
 *   flashcore_kernel_families     the GPU kernel families compiled in, space-separated, e.g.
 *                                 "sm80 sm90"; "" in a CPU-only build
 *   flashcore_cuda_architectures  per family, its GPU code: "sm80: sm_80 sm_90; sm90: sm_90a"
 *                                 (sm_XX machine code, compute_XX PTX)
 *   flashcore_cuda_version        the CUDA toolkit that built it, e.g. "13.0.88"; "" without CUDA */
FLASHCORE_C_EXPORT const char* flashcore_kernel_families(void);
FLASHCORE_C_EXPORT const char* flashcore_cuda_architectures(void);
FLASHCORE_C_EXPORT const char* flashcore_cuda_version(void);

/* The message of the most recent call on this thread that did not return FLASHCORE_STATUS_OK, or
 * "" when the most recent call succeeded. The pointer stays valid until this thread's next call
 * into the library. */
FLASHCORE_C_EXPORT const char* flashcore_last_error(void);

/* Runs the CPU backends' threaded work on the OpenMP runtime `runtime_library` (a path or soname),
 * which must already be loaded in this process, instead of flashcore's own thread pool; NULL or ""
 * goes back to the pool (flashcore/cpu_threads.h says why: PyTorch's OpenMP threads spin after
 * each op and would take the pool's cores). Returns FLASHCORE_STATUS_INVALID_ARGUMENT, the choice
 * unchanged, when the library is not loaded or is not an OpenMP runtime. Added without an ABI
 * version bump: a binding looks the symbol up before calling it. */
FLASHCORE_C_EXPORT int flashcore_cpu_use_openmp(const char* runtime_library);

/* The options of a call, in one struct whose first field is its size: a caller compiled against an
 * older header passes a smaller struct_size, and the library reads only that many bytes, giving
 * every later field its default. New options are appended; fields are never reordered or removed.
 * Initialise with flashcore_options_init, then set what differs. */
typedef struct flashcore_options {
  size_t struct_size;    /* sizeof(flashcore_options) as the caller compiled it */
  int32_t has_softmax_scale; /* 0 (the default): softmax_scale is 1/sqrt(head_dim); else use it */
  float softmax_scale;   /* the factor on q·k when has_softmax_scale; must be finite */
  int32_t causal;        /* nonzero: query i sees key j iff j <= i + seqlen_k - seqlen_q */
  int32_t deterministic; /* backward: bit-identical gradients run after run */
  int32_t backend;       /* FLASHCORE_BACKEND_*; AUTO picks by the tensors' device */
  int32_t kernels;       /* FLASHCORE_KERNELS_*; CUDA tensors only */
  int32_t num_threads;   /* CPU backends: worker threads, 0 = every hardware thread */
  void* stream;          /* cudaStream_t for CUDA tensors; NULL is the legacy default stream */
  /* backward: scratch memory on the tensors' device of at least flashcore_backward_workspace_size()
   * bytes, which the caller allocates (e.g. from its framework's caching allocator). NULL with 0
   * bytes: the library allocates and frees it itself. */
  void* workspace;
  size_t workspace_bytes;
  /* Score options (flashcore/attention.h). The backward must be given the forward's. */
  int64_t window_left;  /* sliding window: -1 (the default) = unbounded; else keys at most this far left of the diagonal */
  int64_t window_right; /* -1 (the default) = unbounded; causal makes it 0 */
  float softcap;        /* 0 (the default) = off; > 0: scores become softcap * tanh(score / softcap) */
  /* NULL (the default) or data == NULL: no ALiBi; else float32 slopes (heads_q) or (batch, heads_q)
   * on the tensors' device, adding -slope * |i + seqlen_k - seqlen_q - j| to the scores. */
  const flashcore_tensor* alibi_slopes;
  /* Variable-length batches (flashcore/attention.h, "varlen"): NULL (the default) or data == NULL:
   * the dense layout. Else int32 (batch + 1) offsets on the tensors' device, and q, out, dq, dout
   * are (total_q, heads_q, head_dim), k, v, dk, dv (total_k, heads_kv, head_dim), lse
   * (heads_q, total_q); max_seqlen_q / max_seqlen_k (>= 1) bound every sequence's length. */
  const flashcore_tensor* cu_seqlens_q;
  const flashcore_tensor* cu_seqlens_k;
  int64_t max_seqlen_q;
  int64_t max_seqlen_k;
  /* Dropout (flashcore/attention.h, "dropout"; ABI version 4): dropout_p in [0, 1), 0 (the default)
   * = off; the Philox stream's 64-bit seed and 32-bit offset. The backward must be given the
   * forward's three values. */
  float dropout_p;
  uint64_t dropout_seed;
  uint32_t dropout_offset;
  /* Paged keys and values (flashcore/attention.h, "paged"; ABI version 5), flashcore_forward with
   * cu_seqlens only: NULL (the default) or data == NULL: k and v hold the keys; else int32
   * (batch, max_pages) on the tensors' device, and k, v are (num_pages, page_size, heads_kv,
   * head_dim) pages. The backward and flashcore_forward_kvcache (which takes its own block_table
   * argument) reject it. */
  const flashcore_tensor* block_table;
} flashcore_options;

/* Fills *options with the defaults (window_left and window_right -1, every other field 0 or NULL)
 * and struct_size. A caller compiled against an older, smaller struct gets these defaults for the
 * fields it does not have. */
FLASHCORE_C_EXPORT void flashcore_options_init(flashcore_options* options);

/* out = softmax(softmax_scale * q kᵀ + mask) v, and its log-sum-exp.
 *   q, k, v      inputs, float16 or bfloat16, all of one dtype and device.
 *   out          output like q (same shape, dtype and device; any strides).
 *   lse          optional output (NULL, or data == NULL: not written), float32
 *                (batch, heads_q, seqlen_q). backward needs it.
 *   options      see flashcore_options; NULL means every default. */
FLASHCORE_C_EXPORT int flashcore_forward(const flashcore_tensor* q, const flashcore_tensor* k,
                                         const flashcore_tensor* v, const flashcore_tensor* out,
                                         const flashcore_tensor* lse, const flashcore_options* options);

/* Writes to *bytes the scratch memory flashcore_backward needs for these arguments (0 for the CPU
 * backends). Arguments as for flashcore_backward; nothing runs. */
FLASHCORE_C_EXPORT int flashcore_backward_workspace_size(
    const flashcore_tensor* q, const flashcore_tensor* k, const flashcore_tensor* v,
    const flashcore_tensor* out, const flashcore_tensor* dout, const flashcore_tensor* lse,
    const flashcore_tensor* dq, const flashcore_tensor* dk, const flashcore_tensor* dv,
    const flashcore_options* options, size_t* bytes);

/* Gradients of the loss with respect to q, k and v, from the forward's out and lse.
 *   q, k, v, out, lse   as passed to (and written by) flashcore_forward; lse is required.
 *   dout         gradient of the loss with respect to out, like q.
 *   dq, dk, dv   outputs like q, k and v; fully overwritten (no accumulation into them).
 *   options      the forward's softmax_scale and causal, plus deterministic and the workspace. */
FLASHCORE_C_EXPORT int flashcore_backward(const flashcore_tensor* q, const flashcore_tensor* k,
                                          const flashcore_tensor* v, const flashcore_tensor* out,
                                          const flashcore_tensor* dout, const flashcore_tensor* lse,
                                          const flashcore_tensor* dq, const flashcore_tensor* dk,
                                          const flashcore_tensor* dv, const flashcore_options* options);

/* Writes to *family the FLASHCORE_KERNELS_* family flashcore_forward (backward = 0) or
 * flashcore_backward (backward != 0) would run for these arguments, AUTO resolved; nothing runs.
 * CPU calls report FLASHCORE_KERNELS_AUTO. For benchmarks that record which kernels ran. For the
 * forward pass only q, k, v, out and lse are read (dout, dq, dk, dv may be NULL). */
FLASHCORE_C_EXPORT int flashcore_selected_kernels(const flashcore_tensor* q, const flashcore_tensor* k,
                                                  const flashcore_tensor* v, const flashcore_tensor* out,
                                                  const flashcore_tensor* dout, const flashcore_tensor* lse,
                                                  const flashcore_tensor* dq, const flashcore_tensor* dk,
                                                  const flashcore_tensor* dv, int backward,
                                                  const flashcore_options* options, int32_t* family);

/* Merges two partial attention results for the same queries over disjoint sets of keys into the
 * exact result over their union (flashcore/merge.h has the formula and the special values):
 *   lse = log(exp(lse_a) + exp(lse_b)),  out = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b,
 * in float32. What ring attention (context parallelism) and split-KV decoding combine blocks with.
 *   out_a, out_b, out   (batch, seqlen, heads, head_dim), each float16, bfloat16 or float32
 *   lse_a, lse_b, lse   (batch, heads, seqlen), float32; lse optional (NULL or data == NULL)
 *   out / lse may be out_a / lse_a (or the b side) itself, for an in-place merge; no other overlap.
 *   options      only backend, num_threads and stream are read; NULL means every default. */
FLASHCORE_C_EXPORT int flashcore_merge_partials(const flashcore_tensor* out_a, const flashcore_tensor* lse_a,
                                                const flashcore_tensor* out_b, const flashcore_tensor* lse_b,
                                                const flashcore_tensor* out, const flashcore_tensor* lse,
                                                const flashcore_options* options);

/* forward_kvcache's own options (flashcore/kvcache.h), sized like flashcore_options. */
typedef struct flashcore_kvcache_options {
  size_t struct_size;         /* sizeof(flashcore_kvcache_options) as the caller compiled it */
  int32_t rotary_interleaved; /* 1 (the default): pairs (2i, 2i+1); 0: halves (i, i + rotary_dim/2) */
  int32_t num_splits;         /* split-KV CTAs per sequence and kv head; 0 (the default): heuristic */
  int32_t check_indices;      /* 1 (the default): copy the index tensors to the host and check them */
} flashcore_kvcache_options;

/* Fills *options with the defaults and struct_size. */
FLASHCORE_C_EXPORT void flashcore_kvcache_options_init(flashcore_kvcache_options* options);

/* flash_attn_with_kvcache: appends k_new / v_new (rotated when rotary_cos / rotary_sin are given)
 * to the cache in place at cache_seqlens, then attention of q over each sequence's cache
 * (flashcore/kvcache.h states the layouts and rules). Optional tensors may be NULL (or data NULL):
 * k_new, v_new, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx, cache_leftpad,
 * block_table (present: a paged cache), lse. Index tensors are FLASHCORE_DTYPE_INT32.
 * options: scale, causal, window, softcap, alibi_slopes, backend, kernels, stream, threads;
 * kvcache_options: NULL means every default. A rejected call has written nothing, the cache
 * included. */
FLASHCORE_C_EXPORT int flashcore_forward_kvcache(
    const flashcore_tensor* q, const flashcore_tensor* k_cache, const flashcore_tensor* v_cache,
    const flashcore_tensor* k_new, const flashcore_tensor* v_new, const flashcore_tensor* rotary_cos,
    const flashcore_tensor* rotary_sin, const flashcore_tensor* cache_seqlens,
    const flashcore_tensor* cache_batch_idx, const flashcore_tensor* cache_leftpad,
    const flashcore_tensor* block_table, const flashcore_tensor* out, const flashcore_tensor* lse,
    const flashcore_options* options, const flashcore_kvcache_options* kvcache_options);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLASHCORE_C_API_H_ */
