// flashcore::cuda::forward_paged (api/cuda_backend.h): a paged varlen forward on CUDA tensors. The
// pages a call uses are gathered, on the call's stream, into packed (rows, heads_kv, head_dim)
// copies (key j of sequence b to row cu_seqlens_k[b] + j), then the varlen forward runs on them.
// The offsets and the block table stay on the device (reading them would synchronise), so the
// copies hold batch * max_seqlen_k rows, a bound on the packed total for valid offsets; the gather
// guards its own accesses: a page id outside [0, num_pages) or past max_pages gathers zeros, a row
// past the copies is not written.
#include <cstdint>
#include <string>

#include "api/cuda_backend.h"
#include "cuda/common/cuda_check.h"
#include "cuda/device.h"
#include "cuda/staging.h"

namespace flashcore::cuda {
namespace {

constexpr const char* kFn = "flashcore::forward";
constexpr int kThreads = 256;

struct PagesView {
  const std::uint16_t* data;  // (num_pages, page_size, heads_kv, head_dim), head_dim contiguous
  std::int64_t page_stride;
  std::int64_t slot_stride;
  std::int64_t head_stride;
};

struct TableView {
  const std::int32_t* block_table;  // (batch, max_pages)
  std::int64_t row_stride;
  std::int64_t column_stride;
  const std::int32_t* cu_seqlens_k;  // (batch + 1)
  std::int64_t offset_stride;
};

// blockIdx.y strides over sequences, the threads of blockIdx.x over a sequence's (key, head,
// column) elements; 16-bit elements are copied as bits (fp16 and bf16 alike).
__global__ void gather_pages_kernel(PagesView pages, TableView table, detail::PagedKv layout, std::int64_t rows,
                                    std::uint16_t* packed) {
  const std::int64_t row_elements = layout.heads_kv * layout.head_dim;
  for (std::int64_t b = blockIdx.y; b < layout.batch; b += gridDim.y) {
    const std::int64_t first = table.cu_seqlens_k[b * table.offset_stride];
    const std::int64_t length = table.cu_seqlens_k[(b + 1) * table.offset_stride] - first;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < length * row_elements;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
      const std::int64_t j = i / row_elements;
      const std::int64_t row = first + j;
      if (row < 0 || row >= rows) continue;
      const std::int64_t within = i % row_elements;
      const std::int64_t h = within / layout.head_dim;
      const std::int64_t c = within % layout.head_dim;
      const std::int64_t column = j / layout.page_size;
      const std::int64_t page =
          column < layout.max_pages ? table.block_table[b * table.row_stride + column * table.column_stride] : -1;
      std::uint16_t value = 0;
      if (page >= 0 && page < layout.num_pages) {
        value = pages.data[page * pages.page_stride + (j % layout.page_size) * pages.slot_stride + h * pages.head_stride + c];
      }
      packed[row * row_elements + within] = value;
    }
  }
}

Status gather(const TensorView& pages, const ForwardParams& params, const detail::PagedKv& layout, std::int64_t rows,
              const TensorView& packed, cudaStream_t stream) {
  const PagesView source{static_cast<const std::uint16_t*>(pages.data), pages.stride[0], pages.stride[1], pages.stride[2]};
  const TableView table{static_cast<const std::int32_t*>(params.block_table.data), params.block_table.stride[0],
                        params.block_table.stride[1], static_cast<const std::int32_t*>(params.cu_seqlens_k.data),
                        params.cu_seqlens_k.stride[0]};
  const std::int64_t per_sequence = params.max_seqlen_k * layout.heads_kv * layout.head_dim;
  const std::int64_t blocks = (per_sequence + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(blocks < 4096 ? blocks : 4096),
                  static_cast<unsigned>(layout.batch < 65535 ? layout.batch : 65535));
  gather_pages_kernel<<<grid, kThreads, 0, stream>>>(source, table, layout, rows, static_cast<std::uint16_t*>(packed.data));
  return cuda_status(cudaGetLastError(), "flashcore::forward: launching the page gather");
}

}  // namespace

Status forward_paged(const ForwardParams& params, const detail::PagedKv& layout) {
  DeviceInfo device;
  FLASHCORE_RETURN_IF_ERROR(current_device(kFn, &device));
  FLASHCORE_RETURN_IF_ERROR(check_device_pointers(kFn, device,
                                                  {{"k", &params.k},
                                                   {"v", &params.v},
                                                   {"block_table", &params.block_table},
                                                   {"cu_seqlens_k", &params.cu_seqlens_k}}));
  if (dtype_size(params.k.dtype) != 2) {
    return Status::InvalidArgument(std::string(kFn) + ": q: float32 inputs run on the CPU backends only; the CUDA "
                                                      "backend takes float16 or bfloat16");
  }
  const auto stream = static_cast<cudaStream_t>(params.stream);
  const std::int64_t rows = layout.batch * params.max_seqlen_k;
  // StagingArea's buffers are (batch, seqlen, heads, head_dim) with batch 1 here; freed on the
  // stream once the forward below has been queued.
  StagingArea area(stream);
  TensorView like = make_view(nullptr, params.k.dtype, Device::kCUDA, {1, rows, layout.heads_kv, layout.head_dim});
  TensorView k_staged, v_staged;
  FLASHCORE_RETURN_IF_ERROR(area.stage_output(like, layout.head_dim, &k_staged));
  FLASHCORE_RETURN_IF_ERROR(area.stage_output(like, layout.head_dim, &v_staged));
  const TensorView k = make_view(k_staged.data, params.k.dtype, Device::kCUDA, {rows, layout.heads_kv, layout.head_dim});
  const TensorView v = make_view(v_staged.data, params.v.dtype, Device::kCUDA, {rows, layout.heads_kv, layout.head_dim});
  FLASHCORE_RETURN_IF_ERROR(gather(params.k, params, layout, rows, k, stream));
  FLASHCORE_RETURN_IF_ERROR(gather(params.v, params, layout, rows, v, stream));
  return flashcore::forward(detail::gathered_call(params, k, v));
}

}  // namespace flashcore::cuda
