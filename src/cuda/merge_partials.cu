// flashcore::cuda::merge_partials (flashcore/merge.h): one warp per (batch, seqlen, head) row.
//
// Arch-neutral on purpose: a memory-bound elementwise pass (read two rows and two LSEs, write one
// row and one LSE) gains nothing from Hopper's TMA or wgmma, so it is plain CUDA C++ compiled for
// every architecture the library targets, with no kernel family and no dispatch row. The lanes of
// a warp read consecutive elements of the row (head_dim is contiguous), so each load instruction
// is coalesced; dtypes are read at run time (the branch is uniform across the grid), which keeps
// one kernel for every mix of fp16, bf16 and fp32 inputs and outputs.
//
// Per row it costs 2 LSE loads, 1 LSE store and head_dim elements of each tensor: for the ring's
// 64k-token bf16 shard with 32 heads of 128 about 1.6 GB, well under a millisecond on an H100/H200,
// against the hundred-odd milliseconds of attention it merges.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "api/cuda_backend.h"
#include "common/merge_weights.h"
#include "cuda/common/cuda_check.h"
#include "cuda/device.h"

namespace flashcore::cuda {
namespace {

constexpr const char* kFn = "flashcore::merge_partials";
constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = 8;

// A (batch, seqlen, heads, head_dim) tensor as the kernel reads it: strides in elements.
struct RowsView {
  void* data;
  DType dtype;
  std::int64_t stride_batch, stride_seqlen, stride_head;
};

// A (batch, heads, seqlen) float32 LSE; data null: absent (the output LSE only).
struct LseView {
  float* data;
  std::int64_t stride_batch, stride_head, stride_seqlen;
};

struct MergeArgs {
  RowsView out_a, out_b, out;
  LseView lse_a, lse_b, lse;
  std::int64_t rows, seqlen, heads;
  std::int64_t head_dim;
};

__device__ __forceinline__ std::int64_t row_offset(const RowsView& t, std::int64_t b, std::int64_t s, std::int64_t h) {
  return b * t.stride_batch + s * t.stride_seqlen + h * t.stride_head;
}

__device__ __forceinline__ float& lse_ref(const LseView& t, std::int64_t b, std::int64_t h, std::int64_t s) {
  return t.data[b * t.stride_batch + h * t.stride_head + s * t.stride_seqlen];
}

__device__ __forceinline__ float load(const RowsView& t, std::int64_t i) {
  switch (t.dtype) {
    case DType::kFloat32: return static_cast<const float*>(t.data)[i];
    case DType::kBFloat16: return __bfloat162float(static_cast<const __nv_bfloat16*>(t.data)[i]);
    default: return __half2float(static_cast<const __half*>(t.data)[i]);
  }
}

__device__ __forceinline__ void store(const RowsView& t, std::int64_t i, float value) {
  switch (t.dtype) {
    case DType::kFloat32: static_cast<float*>(t.data)[i] = value; break;
    case DType::kBFloat16: static_cast<__nv_bfloat16*>(t.data)[i] = __float2bfloat16_rn(value); break;
    default: static_cast<__half*>(t.data)[i] = __float2half_rn(value); break;
  }
}

__global__ void __launch_bounds__(kWarpSize * kWarpsPerBlock) merge_kernel(const MergeArgs args) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= args.rows) return;  // whole warps leave together: a warp owns one row
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const std::int64_t h = row % args.heads;
  const std::int64_t s = (row / args.heads) % args.seqlen;
  const std::int64_t b = row / (args.heads * args.seqlen);

  const MergeWeights w = merge_weights(lse_ref(args.lse_a, b, h, s), lse_ref(args.lse_b, b, h, s));
  const std::int64_t a0 = row_offset(args.out_a, b, s, h);
  const std::int64_t b0 = row_offset(args.out_b, b, s, h);
  const std::int64_t o0 = row_offset(args.out, b, s, h);
  // In place (out is out_a or out_b) is safe: each element is read and written by one thread.
  for (std::int64_t d = lane; d < args.head_dim; d += kWarpSize) {
    store(args.out, o0 + d, merge_value(w, load(args.out_a, a0 + d), load(args.out_b, b0 + d)));
  }
  if (args.lse.data != nullptr) {
    __syncwarp();  // every lane has read lse_a / lse_b before lane 0 may overwrite one in place
    if (lane == 0) lse_ref(args.lse, b, h, s) = w.lse;
  }
}

RowsView rows_view(const TensorView& t) { return {t.data, t.dtype, t.stride[0], t.stride[1], t.stride[2]}; }

LseView lse_view(const TensorView& t) {
  return {static_cast<float*>(t.data), t.stride[0], t.stride[1], t.stride[2]};
}

}  // namespace

Status merge_partials(const MergeParams& params, const detail::MergeProblem& p) {
  DeviceInfo device;
  FLASHCORE_RETURN_IF_ERROR(current_device(kFn, &device));
  FLASHCORE_RETURN_IF_ERROR(check_device_pointers(
      kFn, device, {{"out_a", &params.out_a}, {"lse_a", &params.lse_a}, {"out_b", &params.out_b},
                    {"lse_b", &params.lse_b}, {"out", &params.out}, {"lse", &params.lse}}));
  MergeArgs args;
  args.out_a = rows_view(params.out_a);
  args.out_b = rows_view(params.out_b);
  args.out = rows_view(params.out);
  args.lse_a = lse_view(params.lse_a);
  args.lse_b = lse_view(params.lse_b);
  args.lse = params.lse.present() ? lse_view(params.lse) : LseView{nullptr, 0, 0, 0};
  args.rows = p.batch * p.seqlen * p.heads;
  args.seqlen = p.seqlen;
  args.heads = p.heads;
  args.head_dim = p.head_dim;
  const std::int64_t blocks = (args.rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > 0x7fffffff) {
    return Status::NotSupported(std::string(kFn) + ": out_a: " + std::to_string(args.rows) +
                                " rows (batch x seqlen x heads) exceed one launch's grid");
  }
  merge_kernel<<<static_cast<unsigned>(blocks), kWarpSize * kWarpsPerBlock, 0,
                 static_cast<cudaStream_t>(params.stream)>>>(args);
  return cuda_status(cudaGetLastError(), "flashcore::merge_partials: launching the merge kernel");
}

}  // namespace flashcore::cuda
