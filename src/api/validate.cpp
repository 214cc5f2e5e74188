// Argument validation for forward() and backward(): every rejection names the argument.
#include <cmath>
#include <sstream>
#include <string>

#include "api/problem.h"

namespace flashcore::detail {
namespace {

std::string shape_string(const TensorView& t) {
  std::ostringstream out;
  out << "(";
  for (int i = 0; i < t.rank && i < kMaxRank; ++i) out << (i ? ", " : "") << t.shape[i];
  out << ")";
  return out.str();
}

class Checker {
 public:
  explicit Checker(const char* function) : function_(function) {}

  Status fail(const std::string& argument, const std::string& what) const {
    return Status::InvalidArgument(std::string(function_) + ": " + argument + ": " + what);
  }

  // A rank-`rank` tensor with positive sizes, non-negative strides, a contiguous last dimension
  // and a largest element offset that fits in int64.
  Status check_layout(const char* name, const TensorView& t, int rank, const char* dims) const {
    if (t.data == nullptr) return fail(name, "is null (expected a tensor of shape " + std::string(dims) + ")");
    if (t.rank != rank) {
      return fail(name, "expected rank " + std::to_string(rank) + " " + dims + ", got rank " + std::to_string(t.rank));
    }
    std::int64_t max_offset = 0;
    for (int i = 0; i < rank; ++i) {
      if (t.shape[i] < 1) {
        return fail(name, "dimension " + std::to_string(i) + " of " + dims + " must be at least 1, got shape " +
                              shape_string(t));
      }
      if (t.stride[i] < 0) {
        return fail(name, "stride " + std::to_string(i) + " is negative (" + std::to_string(t.stride[i]) + ")");
      }
      std::int64_t extent = 0;
      if (__builtin_mul_overflow(t.shape[i] - 1, t.stride[i], &extent) ||
          __builtin_add_overflow(max_offset, extent, &max_offset)) {
        return fail(name, "strides overflow a 64-bit element offset for shape " + shape_string(t));
      }
    }
    std::int64_t max_bytes = 0;
    if (__builtin_add_overflow(max_offset, 1, &max_bytes) ||
        __builtin_mul_overflow(max_bytes, static_cast<std::int64_t>(dtype_size(t.dtype)), &max_bytes)) {
      return fail(name, "strides overflow a 64-bit byte offset for shape " + shape_string(t));
    }
    if (t.stride[rank - 1] != 1 && t.shape[rank - 1] != 1) {
      return fail(name, "the last dimension must be contiguous (stride 1), got stride " +
                            std::to_string(t.stride[rank - 1]));
    }
    return Status::Ok();
  }

  Status check_shape(const char* name, const TensorView& t, std::int64_t d0, std::int64_t d1, std::int64_t d2,
                     std::int64_t d3, const char* dims) const {
    const std::int64_t want[4] = {d0, d1, d2, d3};
    for (int i = 0; i < t.rank; ++i) {
      if (t.shape[i] != want[i]) {
        TensorView expected;
        expected.rank = t.rank;
        for (int j = 0; j < t.rank; ++j) expected.shape[j] = want[j];
        return fail(name, "expected shape " + shape_string(expected) + " " + dims + ", got " + shape_string(t));
      }
    }
    return Status::Ok();
  }

  Status check_like(const char* name, const TensorView& t, DType dtype, Device device) const {
    if (t.dtype != dtype) {
      return fail(name, std::string("expected dtype ") + dtype_name(dtype) + ", got " + dtype_name(t.dtype));
    }
    if (t.device != device) {
      return fail(name, std::string("expected a ") + device_name(device) + " tensor like q, got a " +
                            device_name(t.device) + " tensor");
    }
    return Status::Ok();
  }

 private:
  const char* function_;
};

constexpr const char* kQDims = "(batch, seqlen_q, heads_q, head_dim)";
constexpr const char* kKDims = "(batch, seqlen_k, heads_kv, head_dim)";
constexpr const char* kLseDims = "(batch, heads_q, seqlen_q)";
constexpr const char* kQDimsVarlen = "(total_q, heads_q, head_dim)";
constexpr const char* kKDimsVarlen = "(total_k, heads_kv, head_dim)";
constexpr const char* kLseDimsVarlen = "(heads_q, total_q)";

// The variable-length arguments of a call (attention.h, "varlen").
struct VarlenArgs {
  const TensorView& cu_seqlens_q;
  const TensorView& cu_seqlens_k;
  std::int64_t max_seqlen_q;
  std::int64_t max_seqlen_k;
  bool present() const { return cu_seqlens_q.present() || cu_seqlens_k.present(); }
};

// cu_seqlens_q / cu_seqlens_k: int32 (batch + 1) on q's device; on the host, their values too.
Status check_cu_seqlens(const Checker& c, const char* name, const char* max_name, const TensorView& t,
                        std::int64_t batch, std::int64_t total, std::int64_t max_seqlen, Device device,
                        const char* total_name) {
  FLASHCORE_RETURN_IF_ERROR(c.check_layout(name, t, 1, "(batch + 1)"));
  FLASHCORE_RETURN_IF_ERROR(c.check_like(name, t, DType::kInt32, device));
  if (batch >= 0 && t.shape[0] != batch + 1) {
    return c.fail(name, "expected shape (" + std::to_string(batch + 1) + ") like cu_seqlens_q (batch + 1), got (" +
                            std::to_string(t.shape[0]) + ")");
  }
  if (t.shape[0] < 2) return c.fail(name, "expected at least 2 offsets (batch + 1, batch >= 1), got 1");
  if (device != Device::kCPU) return Status::Ok();
  const auto* offsets = static_cast<const std::int32_t*>(t.data);
  if (offsets[0] != 0) return c.fail(name, "must start at 0, got " + std::to_string(offsets[0]));
  for (std::int64_t b = 0; b + 1 < t.shape[0]; ++b) {
    const std::int64_t length = static_cast<std::int64_t>(offsets[b + 1]) - offsets[b];
    if (length < 0) {
      return c.fail(name, "must not decrease, got " + std::to_string(offsets[b]) + " then " +
                              std::to_string(offsets[b + 1]) + " at index " + std::to_string(b));
    }
    if (length > max_seqlen) {
      return c.fail(name, "sequence " + std::to_string(b) + " has length " + std::to_string(length) + ", above " +
                              max_name + " (" + std::to_string(max_seqlen) + ")");
    }
  }
  if (offsets[t.shape[0] - 1] != total) {
    return c.fail(name, "must end at " + std::string(total_name) + " (" + std::to_string(total) + "), got " +
                            std::to_string(offsets[t.shape[0] - 1]));
  }
  return Status::Ok();
}

// The checks forward() and backward() share: q, k, v, the options, and the backend choice.
Status check_common(const Checker& c, const TensorView& q, const TensorView& k, const TensorView& v,
                    const std::optional<float>& softmax_scale, bool causal, Backend backend, KernelFamily kernels,
                    int num_threads, const VarlenArgs& varlen, AttentionProblem* p) {
  if (varlen.present()) {
    // Packed rows (attention.h, "varlen"): (total, heads, head_dim) and the offsets.
    if (!varlen.cu_seqlens_q.present()) return c.fail("cu_seqlens_q", "is null but cu_seqlens_k is given");
    if (!varlen.cu_seqlens_k.present()) return c.fail("cu_seqlens_k", "is null but cu_seqlens_q is given");
    if (varlen.max_seqlen_q < 1) {
      return c.fail("max_seqlen_q", "must be at least 1 with cu_seqlens_q, got " + std::to_string(varlen.max_seqlen_q));
    }
    if (varlen.max_seqlen_k < 1) {
      return c.fail("max_seqlen_k", "must be at least 1 with cu_seqlens_k, got " + std::to_string(varlen.max_seqlen_k));
    }
    if (varlen.max_seqlen_q > INT32_MAX || varlen.max_seqlen_k > INT32_MAX) {
      return c.fail(varlen.max_seqlen_q > INT32_MAX ? "max_seqlen_q" : "max_seqlen_k", "must fit in int32");
    }
    FLASHCORE_RETURN_IF_ERROR(c.check_layout("q", q, 3, kQDimsVarlen));
    FLASHCORE_RETURN_IF_ERROR(c.check_layout("k", k, 3, kKDimsVarlen));
    FLASHCORE_RETURN_IF_ERROR(c.check_layout("v", v, 3, kKDimsVarlen));
  } else {
    FLASHCORE_RETURN_IF_ERROR(c.check_layout("q", q, 4, kQDims));
    FLASHCORE_RETURN_IF_ERROR(c.check_layout("k", k, 4, kKDims));
    FLASHCORE_RETURN_IF_ERROR(c.check_layout("v", v, 4, kKDims));
  }
  if (q.dtype != DType::kFloat16 && q.dtype != DType::kBFloat16 && q.dtype != DType::kFloat32) {
    return c.fail("q", std::string("expected dtype float16, bfloat16 or float32, got ") + dtype_name(q.dtype));
  }
  FLASHCORE_RETURN_IF_ERROR(c.check_like("k", k, q.dtype, q.device));
  FLASHCORE_RETURN_IF_ERROR(c.check_like("v", v, q.dtype, q.device));

  const int d = varlen.present() ? 1 : 2;  // q's heads dimension
  if (varlen.present()) {
    p->batch = varlen.cu_seqlens_q.shape[0] - 1;
    p->seqlen_q = varlen.max_seqlen_q;
    p->seqlen_k = varlen.max_seqlen_k;
    p->total_q = q.shape[0];
    p->total_k = k.shape[0];
  } else {
    p->batch = q.shape[0];
    p->seqlen_q = q.shape[1];
    p->seqlen_k = k.shape[1];
  }
  p->heads_q = q.shape[d];
  p->head_dim = q.shape[d + 1];
  p->heads_kv = k.shape[d];
  p->dtype = q.dtype;
  p->device = q.device;
  p->causal = causal;
  if (varlen.present()) {
    FLASHCORE_RETURN_IF_ERROR(check_cu_seqlens(c, "cu_seqlens_q", "max_seqlen_q", varlen.cu_seqlens_q, -1, p->total_q,
                                               p->seqlen_q, q.device, "q's total_q"));
    FLASHCORE_RETURN_IF_ERROR(check_cu_seqlens(c, "cu_seqlens_k", "max_seqlen_k", varlen.cu_seqlens_k, p->batch,
                                               p->total_k, p->seqlen_k, q.device, "k's total_k"));
    p->cu_seqlens_q = static_cast<const std::int32_t*>(varlen.cu_seqlens_q.data);
    p->cu_seqlens_k = static_cast<const std::int32_t*>(varlen.cu_seqlens_k.data);
  }

  if (p->head_dim > kMaxHeadDim) {
    return c.fail("q", "head_dim must be at most " + std::to_string(kMaxHeadDim) + ", got " +
                           std::to_string(p->head_dim));
  }
  if (!varlen.present() && k.shape[0] != p->batch) {
    return c.fail("k", "batch " + std::to_string(k.shape[0]) + " does not match q's batch " + std::to_string(p->batch));
  }
  if (k.shape[d + 1] != p->head_dim) {
    return c.fail("k", "head_dim " + std::to_string(k.shape[d + 1]) + " does not match q's head_dim " +
                           std::to_string(p->head_dim));
  }
  if (p->heads_q % p->heads_kv != 0) {
    return c.fail("k", "heads_q (" + std::to_string(p->heads_q) + ") must be a multiple of heads_kv (" +
                           std::to_string(p->heads_kv) + ")");
  }
  if (varlen.present()) {
    FLASHCORE_RETURN_IF_ERROR(c.check_shape("v", v, p->total_k, p->heads_kv, p->head_dim, 0, kKDimsVarlen));
  } else {
    FLASHCORE_RETURN_IF_ERROR(c.check_shape("v", v, p->batch, p->seqlen_k, p->heads_kv, p->head_dim, kKDims));
  }

  if (softmax_scale && !std::isfinite(*softmax_scale)) {
    return c.fail("softmax_scale", "must be finite, got " + std::to_string(*softmax_scale));
  }
  p->softmax_scale = softmax_scale ? *softmax_scale : 1.0f / std::sqrt(static_cast<float>(p->head_dim));

  if (num_threads < 0) return c.fail("num_threads", "must be >= 0 (0 = all hardware threads)");

  switch (backend) {
    case Backend::kAuto:
      p->backend = q.device == Device::kCUDA ? Backend::kCuda : Backend::kCpu;
      break;
    case Backend::kCpu:
    case Backend::kCpuReference:
      if (q.device != Device::kCPU) {
        return c.fail("backend", std::string(backend_name(backend)) + " needs CPU tensors, got CUDA tensors");
      }
      p->backend = backend;
      break;
    case Backend::kCuda:
      if (q.device != Device::kCUDA) {
        return c.fail("backend", "cuda needs CUDA tensors, got CPU tensors (q.device is cpu)");
      }
      p->backend = backend;
      break;
    default:
      return c.fail("backend", "unknown backend value " + std::to_string(static_cast<int>(backend)));
  }
  switch (kernels) {
    case KernelFamily::kAuto: break;
    case KernelFamily::kSm80:
    case KernelFamily::kSm90:
      if (p->backend != Backend::kCuda) {
        return c.fail("kernels", std::string(kernel_family_name(kernels)) + " names GPU kernels, but the call runs on " +
                                     backend_name(p->backend) + " (use kernels=auto)");
      }
      break;
    default:
      return c.fail("kernels", "unknown kernel family value " + std::to_string(static_cast<int>(kernels)) +
                                   " (expected auto, sm80 or sm90)");
  }
  if (q.dtype == DType::kFloat32 && p->backend == Backend::kCuda) {
    return c.fail("q", "float32 inputs run on the CPU backends only; the CUDA backend takes float16 or bfloat16 "
                       "(convert q, k and v, or pass CPU tensors)");
  }
  p->kernels = kernels;
  return Status::Ok();
}

// window_size, softcap and alibi_slopes: checked, then normalised into the problem (problem.h).
Status check_score_options(const Checker& c, std::int64_t window_left, std::int64_t window_right, float softcap,
                           const TensorView& alibi_slopes, AttentionProblem* p) {
  if (window_left < -1) {
    return c.fail("window_left (window_size[0])", "must be -1 (unbounded) or at least 0, got " +
                                                      std::to_string(window_left));
  }
  if (window_right < -1) {
    return c.fail("window_right (window_size[1])", "must be -1 (unbounded) or at least 0, got " +
                                                       std::to_string(window_right));
  }
  if (!std::isfinite(softcap) || softcap < 0.0f) {
    return c.fail("softcap", "must be a finite number >= 0 (0 = off), got " + std::to_string(softcap));
  }
  if (p->causal) window_right = 0;
  if (window_left >= p->seqlen_k) window_left = -1;   // row i's bound i + Sk - Sq - left < 0: no key excluded
  if (window_right >= p->seqlen_q) window_right = -1;  // row 0's bound Sk - Sq + right >= Sk - 1
  if (window_right == 0) p->causal = true;  // the causal rule (with or without a left bound)
  p->window_left = window_left;
  p->window_right = window_right;
  p->softcap = softcap;

  if (alibi_slopes.present()) {
    const TensorView& a = alibi_slopes;
    if (a.rank != 1 && a.rank != 2) {
      return c.fail("alibi_slopes", "expected shape (heads_q) or (batch, heads_q), got rank " + std::to_string(a.rank));
    }
    if (a.rank == 1) {
      FLASHCORE_RETURN_IF_ERROR(c.check_layout("alibi_slopes", a, 1, "(heads_q)"));
    } else {
      FLASHCORE_RETURN_IF_ERROR(c.check_layout("alibi_slopes", a, 2, "(batch, heads_q)"));
    }
    FLASHCORE_RETURN_IF_ERROR(c.check_like("alibi_slopes", a, DType::kFloat32, p->device));
    const bool heads_ok = a.shape[a.rank - 1] == p->heads_q;
    const bool batch_ok = a.rank == 1 || a.shape[0] == p->batch;
    if (!heads_ok || !batch_ok) {
      return c.fail("alibi_slopes", "expected shape (" + std::to_string(p->heads_q) + ") or (" +
                                        std::to_string(p->batch) + ", " + std::to_string(p->heads_q) +
                                        ") (heads_q) or (batch, heads_q), got " + shape_string(a));
    }
    p->alibi_slopes = static_cast<const float*>(a.data);
    p->alibi_batch_stride = a.rank == 2 ? a.stride[0] : 0;
    // The CUDA option kernels keep scores in units of the softmax scale when there is no softcap
    // (cuda/common/score_mod.h); a scale of 0 has no such unit.
    if (p->device == Device::kCUDA && softcap == 0.0f && p->softmax_scale == 0.0f) {
      return c.fail("softmax_scale", "must not be 0 with alibi_slopes and no softcap on a CUDA device");
    }
  }
  return Status::Ok();
}

// dropout_p in [0, 1); the random stream's head index b * heads_q + h must fit its 32-bit word.
Status check_dropout(const Checker& c, float dropout_p, std::uint64_t seed, std::uint32_t offset,
                     AttentionProblem* p) {
  if (!std::isfinite(dropout_p) || dropout_p < 0.0f || dropout_p >= 1.0f) {
    return c.fail("dropout_p", "must be in [0, 1) (0 = off), got " + std::to_string(dropout_p));
  }
  if (dropout_p > 0.0f && p->batch * p->heads_q > static_cast<std::int64_t>(UINT32_MAX)) {
    return c.fail("dropout_p", "needs batch * heads_q below 2^32 (the random stream's head index), got " +
                                   std::to_string(p->batch * p->heads_q));
  }
  p->dropout_p = dropout_p;
  p->dropout_seed = seed;
  p->dropout_offset = offset;
  return Status::Ok();
}

Status check_lse(const Checker& c, const char* name, const TensorView& lse, const AttentionProblem& p) {
  if (p.varlen()) {
    FLASHCORE_RETURN_IF_ERROR(c.check_layout(name, lse, 2, kLseDimsVarlen));
    FLASHCORE_RETURN_IF_ERROR(c.check_like(name, lse, DType::kFloat32, p.device));
    return c.check_shape(name, lse, p.heads_q, p.total_q, 0, 0, kLseDimsVarlen);
  }
  FLASHCORE_RETURN_IF_ERROR(c.check_layout(name, lse, 3, kLseDims));
  FLASHCORE_RETURN_IF_ERROR(c.check_like(name, lse, DType::kFloat32, p.device));
  return c.check_shape(name, lse, p.batch, p.heads_q, p.seqlen_q, 0, kLseDims);
}

Status check_q_like(const Checker& c, const char* name, const TensorView& t, const AttentionProblem& p) {
  if (p.varlen()) {
    FLASHCORE_RETURN_IF_ERROR(c.check_layout(name, t, 3, kQDimsVarlen));
    FLASHCORE_RETURN_IF_ERROR(c.check_like(name, t, p.dtype, p.device));
    return c.check_shape(name, t, p.total_q, p.heads_q, p.head_dim, 0, kQDimsVarlen);
  }
  FLASHCORE_RETURN_IF_ERROR(c.check_layout(name, t, 4, kQDims));
  FLASHCORE_RETURN_IF_ERROR(c.check_like(name, t, p.dtype, p.device));
  return c.check_shape(name, t, p.batch, p.seqlen_q, p.heads_q, p.head_dim, kQDims);
}

Status check_k_like(const Checker& c, const char* name, const TensorView& t, const AttentionProblem& p) {
  if (p.varlen()) {
    FLASHCORE_RETURN_IF_ERROR(c.check_layout(name, t, 3, kKDimsVarlen));
    FLASHCORE_RETURN_IF_ERROR(c.check_like(name, t, p.dtype, p.device));
    return c.check_shape(name, t, p.total_k, p.heads_kv, p.head_dim, 0, kKDimsVarlen);
  }
  FLASHCORE_RETURN_IF_ERROR(c.check_layout(name, t, 4, kKDims));
  FLASHCORE_RETURN_IF_ERROR(c.check_like(name, t, p.dtype, p.device));
  return c.check_shape(name, t, p.batch, p.seqlen_k, p.heads_kv, p.head_dim, kKDims);
}

}  // namespace

Status validate_forward(const ForwardParams& params, AttentionProblem* problem) {
  const Checker c("flashcore::forward");
  if (params.block_table.present()) {
    // forward() gathers the pages first (paged_kv.h) and validates the call on the gathered copies.
    return c.fail("block_table", "paged keys and values are gathered by forward() itself; validate its gathered call");
  }
  const VarlenArgs varlen{params.cu_seqlens_q, params.cu_seqlens_k, params.max_seqlen_q, params.max_seqlen_k};
  FLASHCORE_RETURN_IF_ERROR(check_common(c, params.q, params.k, params.v, params.softmax_scale, params.causal,
                                         params.backend, params.kernels, params.num_threads, varlen, problem));
  FLASHCORE_RETURN_IF_ERROR(check_score_options(c, params.window_left, params.window_right, params.softcap,
                                                params.alibi_slopes, problem));
  FLASHCORE_RETURN_IF_ERROR(
      check_dropout(c, params.dropout_p, params.dropout_seed, params.dropout_offset, problem));
  FLASHCORE_RETURN_IF_ERROR(check_q_like(c, "out", params.out, *problem));
  if (params.lse.present()) FLASHCORE_RETURN_IF_ERROR(check_lse(c, "lse", params.lse, *problem));
  return Status::Ok();
}

Status validate_backward(const BackwardParams& params, AttentionProblem* problem) {
  const Checker c("flashcore::backward");
  const VarlenArgs varlen{params.cu_seqlens_q, params.cu_seqlens_k, params.max_seqlen_q, params.max_seqlen_k};
  FLASHCORE_RETURN_IF_ERROR(check_common(c, params.q, params.k, params.v, params.softmax_scale, params.causal,
                                         params.backend, params.kernels, params.num_threads, varlen, problem));
  FLASHCORE_RETURN_IF_ERROR(check_score_options(c, params.window_left, params.window_right, params.softcap,
                                                params.alibi_slopes, problem));
  FLASHCORE_RETURN_IF_ERROR(
      check_dropout(c, params.dropout_p, params.dropout_seed, params.dropout_offset, problem));
  FLASHCORE_RETURN_IF_ERROR(check_q_like(c, "out", params.out, *problem));
  FLASHCORE_RETURN_IF_ERROR(check_q_like(c, "dout", params.dout, *problem));
  FLASHCORE_RETURN_IF_ERROR(check_lse(c, "lse", params.lse, *problem));
  FLASHCORE_RETURN_IF_ERROR(check_q_like(c, "dq", params.dq, *problem));
  FLASHCORE_RETURN_IF_ERROR(check_k_like(c, "dk", params.dk, *problem));
  FLASHCORE_RETURN_IF_ERROR(check_k_like(c, "dv", params.dv, *problem));
  if (params.workspace == nullptr && params.workspace_bytes != 0) {
    return c.fail("workspace", "is null but workspace_bytes is " + std::to_string(params.workspace_bytes));
  }
  return Status::Ok();
}

}  // namespace flashcore::detail

namespace flashcore::detail {

Status validate_layout(const char* function, const char* name, const TensorView& t, int rank, const char* dims) {
  return Checker(function).check_layout(name, t, rank, dims);
}

Status validate_score_options(const char* function, std::int64_t window_left, std::int64_t window_right, float softcap,
                              const TensorView& alibi_slopes, AttentionProblem* p) {
  return check_score_options(Checker(function), window_left, window_right, softcap, alibi_slopes, p);
}

}  // namespace flashcore::detail
