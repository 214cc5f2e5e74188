// See staging.h.
#include "cuda/staging.h"

#include <cstdint>

#include "cuda/common/cuda_check.h"
#include "cuda/device.h"

namespace flashcore::cuda {
namespace {

constexpr int kThreads = 256;

struct View4 {
  std::int64_t shape[4];
  std::int64_t stride[4];
};

View4 view4(const TensorView& t) {
  return {{t.shape[0], t.shape[1], t.shape[2], t.shape[3]}, {t.stride[0], t.stride[1], t.stride[2], t.stride[3]}};
}

// One thread per element of the contiguous (B, S, H, padded_d) side; 16-bit elements are copied as
// bits, so one kernel serves fp16 and bf16 (0x0000 is +0 in both).
//   to_padded: dst[b, s, h, c] = c < d ? src[b, s, h, c] : 0   (src strided, dst contiguous)
//   else:      dst[b, s, h, c] = src[b, s, h, c] for c < d     (src contiguous, dst strided)
__global__ void restage_kernel(const std::uint16_t* src, std::uint16_t* dst, View4 strided, std::int64_t padded_d,
                               bool to_padded) {
  const std::int64_t d = strided.shape[3];
  const std::int64_t total = strided.shape[0] * strided.shape[1] * strided.shape[2] * padded_d;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t c = i % padded_d;
    std::int64_t rest = i / padded_d;
    const std::int64_t h = rest % strided.shape[2];
    rest /= strided.shape[2];
    const std::int64_t s = rest % strided.shape[1];
    const std::int64_t b = rest / strided.shape[1];
    const std::int64_t at = b * strided.stride[0] + s * strided.stride[1] + h * strided.stride[2] + c * strided.stride[3];
    if (to_padded) {
      dst[i] = c < d ? src[at] : std::uint16_t{0};
    } else if (c < d) {
      dst[at] = src[i];
    }
  }
}

Status launch_restage(const void* src, void* dst, const TensorView& strided, std::int64_t padded_d, bool to_padded,
                      cudaStream_t stream) {
  const std::int64_t total = strided.shape[0] * strided.shape[1] * strided.shape[2] * padded_d;
  if (total == 0) return Status::Ok();
  const std::int64_t blocks = (total + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
  restage_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const std::uint16_t*>(src), static_cast<std::uint16_t*>(dst),
                                                view4(strided), padded_d, to_padded);
  return cuda_status(cudaGetLastError(), "flashcore: launching the staging copy");
}

}  // namespace

bool needs_staging(const detail::AttentionProblem& p, std::initializer_list<const TensorView*> tensors) {
  if (p.head_dim % 8 != 0) return true;
  for (const TensorView* t : tensors) {
    if (t->present() && !rows_aligned(*t)) return true;
  }
  return false;
}

detail::AttentionProblem staged_problem(const detail::AttentionProblem& p) {
  detail::AttentionProblem staged = p;
  staged.head_dim = (p.head_dim + 7) / 8 * 8;
  return staged;
}

StagingArea::~StagingArea() {
  for (void* buffer : buffers_) (void)cudaFreeAsync(buffer, stream_);
}

Status StagingArea::allocate(const TensorView& like, std::int64_t head_dim, TensorView* staged) {
  void* buffer = nullptr;
  const std::size_t bytes = static_cast<std::size_t>(like.shape[0] * like.shape[1] * like.shape[2] * head_dim) *
                            dtype_size(like.dtype);
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&buffer, bytes == 0 ? 16 : bytes, stream_));
  buffers_.push_back(buffer);
  *staged = make_view(buffer, like.dtype, Device::kCUDA, {like.shape[0], like.shape[1], like.shape[2], head_dim});
  return Status::Ok();
}

Status StagingArea::stage_input(const TensorView& t, std::int64_t head_dim, TensorView* staged) {
  if (Status s = allocate(t, head_dim, staged); !s.ok()) return s;
  return launch_restage(t.data, staged->data, t, head_dim, /*to_padded=*/true, stream_);
}

Status StagingArea::stage_output(const TensorView& t, std::int64_t head_dim, TensorView* staged) {
  return allocate(t, head_dim, staged);
}

Status StagingArea::unstage(const TensorView& staged, const TensorView& dst) {
  return launch_restage(staged.data, dst.data, dst, staged.shape[3], /*to_padded=*/false, stream_);
}

}  // namespace flashcore::cuda
