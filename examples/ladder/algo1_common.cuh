// What rungs 3 and 4 (Algorithm 1 forward and backward) share: CuTe views of one (batch, head) of
// a global tensor and the cooperative copy of a tile into shared memory.
#pragma once

#include <cute/tensor.hpp>

#include <cstdint>

namespace flashcore::ladder {

// (seqlen, kHeadDim) view of one (batch, head) of a (batch, seqlen, heads, head_dim) tensor: a
// dynamic row stride (heads * head_dim) and a static, contiguous head-dim mode.
template <int kHeadDim, class T>
__device__ auto head_view(T* base, int batch, int head, int heads, int seqlen) {
  using namespace cute;
  const std::int64_t row_stride = static_cast<std::int64_t>(heads) * kHeadDim;
  T* start = base + static_cast<std::int64_t>(batch) * seqlen * row_stride + static_cast<std::int64_t>(head) * kHeadDim;
  return make_tensor(make_gmem_ptr(start), make_layout(make_shape(seqlen, Int<kHeadDim>{}), make_stride(row_stride, _1{})));
}

// Copies the first `rows` rows of a global tile into a shared one and zero-fills the rest (the
// ragged last tile), consecutive threads taking consecutive columns so the reads coalesce.
template <int kThreads, class SmemTensor, class GmemTensor>
__device__ void load_tile(SmemTensor& smem, const GmemTensor& gmem, int rows) {
  using namespace cute;
  for (int r = 0; r < size<0>(smem); ++r) {
    for (int d = threadIdx.x; d < size<1>(smem); d += kThreads) smem(r, d) = r < rows ? gmem(r, d) : 0.0f;
  }
}

}  // namespace flashcore::ladder
