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

// The checks forward() and backward() share: q, k, v, the options, and the backend choice.
Status check_common(const Checker& c, const TensorView& q, const TensorView& k, const TensorView& v,
                    const std::optional<float>& softmax_scale, bool causal, Backend backend, KernelFamily kernels,
                    int num_threads, AttentionProblem* p) {
  FLASHCORE_RETURN_IF_ERROR(c.check_layout("q", q, 4, kQDims));
  FLASHCORE_RETURN_IF_ERROR(c.check_layout("k", k, 4, kKDims));
  FLASHCORE_RETURN_IF_ERROR(c.check_layout("v", v, 4, kKDims));
  if (q.dtype != DType::kFloat16 && q.dtype != DType::kBFloat16 && q.dtype != DType::kFloat32) {
    return c.fail("q", std::string("expected dtype float16, bfloat16 or float32, got ") + dtype_name(q.dtype));
  }
  FLASHCORE_RETURN_IF_ERROR(c.check_like("k", k, q.dtype, q.device));
  FLASHCORE_RETURN_IF_ERROR(c.check_like("v", v, q.dtype, q.device));

  p->batch = q.shape[0];
  p->seqlen_q = q.shape[1];
  p->heads_q = q.shape[2];
  p->head_dim = q.shape[3];
  p->seqlen_k = k.shape[1];
  p->heads_kv = k.shape[2];
  p->dtype = q.dtype;
  p->device = q.device;
  p->causal = causal;

  if (p->head_dim > kMaxHeadDim) {
    return c.fail("q", "head_dim must be at most " + std::to_string(kMaxHeadDim) + ", got " +
                           std::to_string(p->head_dim));
  }
  if (k.shape[0] != p->batch) {
    return c.fail("k", "batch " + std::to_string(k.shape[0]) + " does not match q's batch " + std::to_string(p->batch));
  }
  if (k.shape[3] != p->head_dim) {
    return c.fail("k", "head_dim " + std::to_string(k.shape[3]) + " does not match q's head_dim " +
                           std::to_string(p->head_dim));
  }
  if (p->heads_q % p->heads_kv != 0) {
    return c.fail("k", "heads_q (" + std::to_string(p->heads_q) + ") must be a multiple of heads_kv (" +
                           std::to_string(p->heads_kv) + ")");
  }
  FLASHCORE_RETURN_IF_ERROR(c.check_shape("v", v, p->batch, p->seqlen_k, p->heads_kv, p->head_dim, kKDims));

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
  }
  return Status::Ok();
}

Status check_lse(const Checker& c, const char* name, const TensorView& lse, const AttentionProblem& p) {
  FLASHCORE_RETURN_IF_ERROR(c.check_layout(name, lse, 3, kLseDims));
  FLASHCORE_RETURN_IF_ERROR(c.check_like(name, lse, DType::kFloat32, p.device));
  return c.check_shape(name, lse, p.batch, p.heads_q, p.seqlen_q, 0, kLseDims);
}

Status check_q_like(const Checker& c, const char* name, const TensorView& t, const AttentionProblem& p) {
  FLASHCORE_RETURN_IF_ERROR(c.check_layout(name, t, 4, kQDims));
  FLASHCORE_RETURN_IF_ERROR(c.check_like(name, t, p.dtype, p.device));
  return c.check_shape(name, t, p.batch, p.seqlen_q, p.heads_q, p.head_dim, kQDims);
}

Status check_k_like(const Checker& c, const char* name, const TensorView& t, const AttentionProblem& p) {
  FLASHCORE_RETURN_IF_ERROR(c.check_layout(name, t, 4, kKDims));
  FLASHCORE_RETURN_IF_ERROR(c.check_like(name, t, p.dtype, p.device));
  return c.check_shape(name, t, p.batch, p.seqlen_k, p.heads_kv, p.head_dim, kKDims);
}

}  // namespace

Status validate_forward(const ForwardParams& params, AttentionProblem* problem) {
  const Checker c("flashcore::forward");
  FLASHCORE_RETURN_IF_ERROR(check_common(c, params.q, params.k, params.v, params.softmax_scale, params.causal,
                                         params.backend, params.kernels, params.num_threads, problem));
  FLASHCORE_RETURN_IF_ERROR(check_score_options(c, params.window_left, params.window_right, params.softcap,
                                                params.alibi_slopes, problem));
  FLASHCORE_RETURN_IF_ERROR(check_q_like(c, "out", params.out, *problem));
  if (params.lse.present()) FLASHCORE_RETURN_IF_ERROR(check_lse(c, "lse", params.lse, *problem));
  return Status::Ok();
}

Status validate_backward(const BackwardParams& params, AttentionProblem* problem) {
  const Checker c("flashcore::backward");
  FLASHCORE_RETURN_IF_ERROR(check_common(c, params.q, params.k, params.v, params.softmax_scale, params.causal,
                                         params.backend, params.kernels, params.num_threads, problem));
  FLASHCORE_RETURN_IF_ERROR(check_score_options(c, params.window_left, params.window_right, params.softcap,
                                                params.alibi_slopes, problem));
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
