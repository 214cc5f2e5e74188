// merge_partials(): validate, then hand the call to the CPU or CUDA backend.
//
// The checks mirror validate.cpp's for attention (rank, positive sizes, non-negative strides that
// cannot overflow, head_dim contiguous), with the merge's own argument names; on top of them, no
// output may overlap an input unless it is that very input (the in-place case merge.h allows).
#include <algorithm>
#include <string>

#include "api/cuda_backend.h"
#include "api/merge_problem.h"
#include "cpu/cpu_backend.h"

namespace flashcore {
namespace detail {
namespace {

constexpr const char* kFn = "flashcore::merge_partials";
constexpr const char* kOutDims = "(batch, seqlen, heads, head_dim)";
constexpr const char* kLseDims = "(batch, heads, seqlen)";

Status fail(const char* name, const std::string& what) {
  return Status::InvalidArgument(std::string(kFn) + ": " + name + ": " + what);
}

std::string shape_string(const TensorView& t) {
  std::string s = "(";
  for (int i = 0; i < t.rank && i < kMaxRank; ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
  return s + ")";
}

// [first, last] byte addresses a view touches; views with positive sizes only.
struct Span {
  std::uintptr_t first = 0;
  std::uintptr_t last = 0;
};

Span span_of(const TensorView& t) {
  std::int64_t max_offset = 0;
  for (int i = 0; i < t.rank; ++i) max_offset += (t.shape[i] - 1) * t.stride[i];
  const auto first = reinterpret_cast<std::uintptr_t>(t.data);
  const auto size = static_cast<std::uintptr_t>(dtype_size(t.dtype));
  return {first, first + static_cast<std::uintptr_t>(max_offset) * size + size - 1};
}

bool same_view(const TensorView& a, const TensorView& b) {
  if (a.data != b.data || a.dtype != b.dtype || a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; ++i) {
    if (a.shape[i] != b.shape[i] || a.stride[i] != b.stride[i]) return false;
  }
  return true;
}


Status check_shape(const char* name, const TensorView& t, const std::int64_t (&want)[4], const char* dims) {
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] != want[i]) {
      TensorView expected;
      expected.rank = t.rank;
      for (int j = 0; j < t.rank; ++j) expected.shape[j] = want[j];
      return fail(name, "expected shape " + shape_string(expected) + " " + dims + " like out_a, got " + shape_string(t));
    }
  }
  return Status::Ok();
}

Status check_device(const char* name, const TensorView& t, Device device) {
  if (t.device == device) return Status::Ok();
  return fail(name, std::string("expected a ") + device_name(device) + " tensor like out_a, got a " +
                        device_name(t.device) + " tensor");
}

Status check_out(const char* name, const TensorView& t, const MergeProblem& p) {
  FLASHCORE_RETURN_IF_ERROR(validate_layout(kFn, name, t, 4, kOutDims));
  FLASHCORE_RETURN_IF_ERROR(check_device(name, t, p.device));
  return check_shape(name, t, {p.batch, p.seqlen, p.heads, p.head_dim}, kOutDims);
}

Status check_lse(const char* name, const TensorView& t, const MergeProblem& p) {
  FLASHCORE_RETURN_IF_ERROR(validate_layout(kFn, name, t, 3, kLseDims));
  if (t.dtype != DType::kFloat32) return fail(name, std::string("expected dtype float32, got ") + dtype_name(t.dtype));
  FLASHCORE_RETURN_IF_ERROR(check_device(name, t, p.device));
  return check_shape(name, t, {p.batch, p.heads, p.seqlen, 0}, kLseDims);
}

// An output may be one of the inputs exactly (in place) but must not partly overlap any input:
// the backends read each element just before writing it, which only exact aliasing survives.
Status check_no_overlap(const char* name, const TensorView& output, const char* input_name, const TensorView& input) {
  if (same_view(output, input)) return Status::Ok();
  const Span o = span_of(output);
  const Span i = span_of(input);
  if (o.first <= i.last && i.first <= o.last) {
    return fail(name, std::string("overlaps ") + input_name + " without being the same view (same data, dtype, shape "
                      "and strides, for an in-place merge); use separate memory");
  }
  return Status::Ok();
}

}  // namespace

Status validate_merge(const MergeParams& params, MergeProblem* p) {
  FLASHCORE_RETURN_IF_ERROR(validate_layout(kFn, "out_a", params.out_a, 4, kOutDims));
  p->batch = params.out_a.shape[0];
  p->seqlen = params.out_a.shape[1];
  p->heads = params.out_a.shape[2];
  p->head_dim = params.out_a.shape[3];
  p->device = params.out_a.device;
  FLASHCORE_RETURN_IF_ERROR(check_out("out_b", params.out_b, *p));
  FLASHCORE_RETURN_IF_ERROR(check_out("out", params.out, *p));
  FLASHCORE_RETURN_IF_ERROR(check_lse("lse_a", params.lse_a, *p));
  FLASHCORE_RETURN_IF_ERROR(check_lse("lse_b", params.lse_b, *p));
  if (params.lse.present()) FLASHCORE_RETURN_IF_ERROR(check_lse("lse", params.lse, *p));

  FLASHCORE_RETURN_IF_ERROR(check_no_overlap("out", params.out, "out_a", params.out_a));
  FLASHCORE_RETURN_IF_ERROR(check_no_overlap("out", params.out, "out_b", params.out_b));
  FLASHCORE_RETURN_IF_ERROR(check_no_overlap("out", params.out, "lse_a", params.lse_a));
  FLASHCORE_RETURN_IF_ERROR(check_no_overlap("out", params.out, "lse_b", params.lse_b));
  if (params.lse.present()) {
    FLASHCORE_RETURN_IF_ERROR(check_no_overlap("lse", params.lse, "out", params.out));
    FLASHCORE_RETURN_IF_ERROR(check_no_overlap("lse", params.lse, "out_a", params.out_a));
    FLASHCORE_RETURN_IF_ERROR(check_no_overlap("lse", params.lse, "out_b", params.out_b));
    FLASHCORE_RETURN_IF_ERROR(check_no_overlap("lse", params.lse, "lse_a", params.lse_a));
    FLASHCORE_RETURN_IF_ERROR(check_no_overlap("lse", params.lse, "lse_b", params.lse_b));
  }

  if (params.num_threads < 0) return fail("num_threads", "must be >= 0 (0 = all hardware threads)");
  switch (params.backend) {
    case Backend::kAuto:
      p->backend = p->device == Device::kCUDA ? Backend::kCuda : Backend::kCpu;
      break;
    case Backend::kCpu:
    case Backend::kCpuReference:
      if (p->device != Device::kCPU) {
        return fail("backend", std::string(backend_name(params.backend)) + " needs CPU tensors, got CUDA tensors");
      }
      p->backend = Backend::kCpu;  // the merge has one CPU implementation
      break;
    case Backend::kCuda:
      if (p->device != Device::kCUDA) return fail("backend", "cuda needs CUDA tensors, got CPU tensors (out_a.device is cpu)");
      p->backend = Backend::kCuda;
      break;
    default:
      return fail("backend", "unknown backend value " + std::to_string(static_cast<int>(params.backend)));
  }
  return Status::Ok();
}

}  // namespace detail

Status merge_partials(const MergeParams& params) {
  detail::MergeProblem problem;
  FLASHCORE_RETURN_IF_ERROR(detail::validate_merge(params, &problem));
  if (problem.backend == Backend::kCuda) return cuda::merge_partials(params, problem);
  return cpu::merge_partials(params, problem);
}

}  // namespace flashcore
