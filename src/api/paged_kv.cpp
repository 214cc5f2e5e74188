// See paged_kv.h.
#include "api/paged_kv.h"

#include <cstring>
#include <string>
#include <vector>

#include "api/cuda_backend.h"
#include "api/problem.h"

namespace flashcore::detail {
namespace {

constexpr const char* kFn = "flashcore::forward";
constexpr const char* kPagedDims = "(num_pages, page_size, heads_kv, head_dim)";

Status fail(const std::string& argument, const std::string& what) {
  return Status::InvalidArgument(std::string(kFn) + ": " + argument + ": " + what);
}

std::string str(std::int64_t value) { return std::to_string(value); }

Status check_like_q(const char* name, const TensorView& t, DType dtype, const TensorView& q) {
  if (t.dtype != dtype) return fail(name, std::string("expected dtype ") + dtype_name(dtype) + ", got " + dtype_name(t.dtype));
  if (t.device != q.device) {
    return fail(name, std::string("expected a ") + device_name(q.device) + " tensor like q, got a " +
                          device_name(t.device) + " tensor");
  }
  return Status::Ok();
}

Status check_layout(const ForwardParams& params, PagedKv* layout) {
  if (!params.cu_seqlens_q.present() || !params.cu_seqlens_k.present()) {
    return fail("block_table", "pages need the varlen layout: give cu_seqlens_q and cu_seqlens_k too "
                               "(flash_attn_varlen_func's block_table)");
  }
  FLASHCORE_RETURN_IF_ERROR(validate_layout(kFn, "k", params.k, 4, kPagedDims));
  FLASHCORE_RETURN_IF_ERROR(validate_layout(kFn, "v", params.v, 4, kPagedDims));
  FLASHCORE_RETURN_IF_ERROR(check_like_q("k", params.k, params.q.dtype, params.q));
  FLASHCORE_RETURN_IF_ERROR(check_like_q("v", params.v, params.q.dtype, params.q));
  for (int i = 0; i < 4; ++i) {
    if (params.v.shape[i] != params.k.shape[i]) {
      return fail("v", "expected the shape of k " + std::string(kPagedDims) + ", got a different size in dimension " +
                           str(i) + " (" + str(params.v.shape[i]) + " vs " + str(params.k.shape[i]) + ")");
    }
  }
  FLASHCORE_RETURN_IF_ERROR(validate_layout(kFn, "block_table", params.block_table, 2, "(batch, max_pages)"));
  FLASHCORE_RETURN_IF_ERROR(check_like_q("block_table", params.block_table, DType::kInt32, params.q));
  FLASHCORE_RETURN_IF_ERROR(validate_layout(kFn, "cu_seqlens_k", params.cu_seqlens_k, 1, "(batch + 1)"));
  FLASHCORE_RETURN_IF_ERROR(check_like_q("cu_seqlens_k", params.cu_seqlens_k, DType::kInt32, params.q));
  layout->batch = params.cu_seqlens_k.shape[0] - 1;
  layout->num_pages = params.k.shape[0];
  layout->page_size = params.k.shape[1];
  layout->heads_kv = params.k.shape[2];
  layout->head_dim = params.k.shape[3];
  layout->max_pages = params.block_table.shape[1];
  if (layout->batch < 1) return fail("cu_seqlens_k", "expected at least 2 offsets (batch + 1, batch >= 1), got 1");
  if (params.block_table.shape[0] != layout->batch) {
    return fail("block_table", "expected " + str(layout->batch) + " rows (batch, from cu_seqlens_k), got " +
                                   str(params.block_table.shape[0]));
  }
  const std::int64_t capacity = layout->max_pages * layout->page_size;
  if (params.max_seqlen_k < 1 || params.max_seqlen_k > capacity) {
    return fail("max_seqlen_k", "must be in [1, max_pages * page_size = " + str(capacity) +
                                    "] (the positions block_table maps), got " + str(params.max_seqlen_k));
  }
  return Status::Ok();
}

// On the host: the offsets (from 0, never decreasing, lengths within max_seqlen_k) and every page
// id a sequence uses.
Status check_host_indices(const ForwardParams& params, const PagedKv& layout) {
  const auto* offsets = static_cast<const std::int32_t*>(params.cu_seqlens_k.data);
  const std::int64_t step = params.cu_seqlens_k.stride[0];
  if (offsets[0] != 0) return fail("cu_seqlens_k", "must start at 0, got " + str(offsets[0]));
  const auto* table = static_cast<const std::int32_t*>(params.block_table.data);
  for (std::int64_t b = 0; b < layout.batch; ++b) {
    const std::int64_t length = static_cast<std::int64_t>(offsets[(b + 1) * step]) - offsets[b * step];
    if (length < 0 || length > params.max_seqlen_k) {
      return fail("cu_seqlens_k", "sequence " + str(b) + " has length " + str(length) + ", outside [0, max_seqlen_k = " +
                                      str(params.max_seqlen_k) + "]");
    }
    for (std::int64_t page = 0; page * layout.page_size < length; ++page) {
      const std::int64_t id = table[b * params.block_table.stride[0] + page * params.block_table.stride[1]];
      if (id < 0 || id >= layout.num_pages) {
        return fail("block_table", "page id " + str(id) + " at [" + str(b) + ", " + str(page) +
                                       "] is outside [0, num_pages = " + str(layout.num_pages) + ")");
      }
    }
  }
  return Status::Ok();
}

// The CPU gather: key j of sequence b to packed row cu_seqlens_k[b] + j.
void gather_host(const ForwardParams& params, const PagedKv& layout, const TensorView& pages, unsigned char* packed) {
  const auto* offsets = static_cast<const std::int32_t*>(params.cu_seqlens_k.data);
  const std::int64_t step = params.cu_seqlens_k.stride[0];
  const auto* table = static_cast<const std::int32_t*>(params.block_table.data);
  const std::size_t element = dtype_size(pages.dtype);
  const std::size_t row_bytes = static_cast<std::size_t>(layout.head_dim) * element;
  const auto* source = static_cast<const unsigned char*>(pages.data);
  for (std::int64_t b = 0; b < layout.batch; ++b) {
    const std::int64_t first = offsets[b * step];
    const std::int64_t length = offsets[(b + 1) * step] - first;
    for (std::int64_t j = 0; j < length; ++j) {
      const std::int64_t page = table[b * params.block_table.stride[0] + (j / layout.page_size) * params.block_table.stride[1]];
      for (std::int64_t h = 0; h < layout.heads_kv; ++h) {
        const std::int64_t from = page * pages.stride[0] + (j % layout.page_size) * pages.stride[1] + h * pages.stride[2];
        std::memcpy(packed + ((first + j) * layout.heads_kv + h) * row_bytes, source + from * element, row_bytes);
      }
    }
  }
}

}  // namespace

ForwardParams gathered_call(const ForwardParams& params, const TensorView& k, const TensorView& v) {
  ForwardParams gathered = params;
  gathered.k = k;
  gathered.v = v;
  gathered.block_table = TensorView{};
  return gathered;
}

Status forward_paged(const ForwardParams& params) {
  PagedKv layout;
  FLASHCORE_RETURN_IF_ERROR(check_layout(params, &layout));
  if (params.q.device == Device::kCUDA) return cuda::forward_paged(params, layout);
  FLASHCORE_RETURN_IF_ERROR(check_host_indices(params, layout));
  const std::int64_t total_k = static_cast<const std::int32_t*>(params.cu_seqlens_k.data)[layout.batch * params.cu_seqlens_k.stride[0]];
  // At least one row, so that the packed views are well formed; the offsets say how many are used
  // (and the varlen validation then names cu_seqlens_k if they end elsewhere).
  const std::int64_t rows = total_k > 0 ? total_k : 1;
  const std::size_t bytes = static_cast<std::size_t>(rows * layout.heads_kv * layout.head_dim) * dtype_size(params.k.dtype);
  std::vector<unsigned char> k_packed(bytes, 0), v_packed(bytes, 0);
  gather_host(params, layout, params.k, k_packed.data());
  gather_host(params, layout, params.v, v_packed.data());
  const TensorView k = make_view(k_packed.data(), params.k.dtype, Device::kCPU, {rows, layout.heads_kv, layout.head_dim});
  const TensorView v = make_view(v_packed.data(), params.v.dtype, Device::kCPU, {rows, layout.heads_kv, layout.head_dim});
  return forward(gathered_call(params, k, v));
}

}  // namespace flashcore::detail
