// See common/kernel_table.h.
#include <limits>

#include "cuda/common/kernel_table.h"

namespace flashcore::cuda {

Status check_kernel_problem(const char* function, const detail::AttentionProblem& p, bool found) {
  const std::string fn(function);
  if (p.head_dim % 8 != 0) {
    return Status::NotSupported(fn + ": head_dim: the CUDA kernels need a multiple of 8, got " +
                                std::to_string(p.head_dim) + " (pad head_dim, or use the CPU backend)");
  }
  if (!found) {
    return Status::NotSupported(fn + ": no CUDA kernel for dtype " + dtype_name(p.dtype) + " and head_dim " +
                                std::to_string(p.head_dim) +
                                " in this build (see FLASHCORE_DTYPES / FLASHCORE_HEAD_DIMS)");
  }
  // Heads and batch index the grid's y and z; seqlens stay below 2^31 with room for tile rounding.
  constexpr std::int64_t kMaxGridYZ = 65535;
  constexpr std::int64_t kMaxSeqlen = std::numeric_limits<int>::max() - 256;
  if (p.heads_q > kMaxGridYZ || p.batch > kMaxGridYZ || p.seqlen_q > kMaxSeqlen || p.seqlen_k > kMaxSeqlen) {
    return Status::NotSupported(fn + ": q: batch and heads must be at most 65535 and seqlens below 2^31 for the "
                                     "CUDA kernels");
  }
  return Status::Ok();
}

Status check_row_alignment(const char* function, const char* name, const TensorView& t) {
  const std::int64_t elems = 16 / static_cast<std::int64_t>(dtype_size(t.dtype));
  const bool aligned = reinterpret_cast<std::uintptr_t>(t.data) % 16 == 0 && t.stride[0] % elems == 0 &&
                       t.stride[1] % elems == 0 && t.stride[2] % elems == 0;
  if (aligned) return Status::Ok();
  return Status::NotSupported(std::string(function) + ": " + name +
                              ": the CUDA kernels need 16-byte aligned rows (data pointer aligned to 16 bytes, "
                              "batch/seqlen/head strides multiples of " + std::to_string(elems) + " elements)");
}

}  // namespace flashcore::cuda
