// Host-side element access for the CPU backends: the fp16/bf16 tag -> C++ type dispatch, strided
// row addressing, and conversions through CUTLASS's half_t / bfloat16_t (round-to-nearest-even,
// the same rounding the GPU kernels apply when they store).
#pragma once

#include <cstdint>

#include <cutlass/numeric_types.h>

#include "flashcore/tensor.h"

namespace flashcore::cpu {

// Calls f(Element{}) with Element = cutlass::half_t or cutlass::bfloat16_t. Validation admits only
// these two for q-like tensors, so everything that is not bf16 is fp16.
template <typename F>
decltype(auto) dispatch_element(DType dtype, F&& f) {
  if (dtype == DType::kBFloat16) return f(cutlass::bfloat16_t{});
  return f(cutlass::half_t{});
}

// Row (i0, i1, i2, :) of a rank-4 view whose last dimension is contiguous.
template <typename T>
T* row_ptr(const TensorView& t, std::int64_t i0, std::int64_t i1, std::int64_t i2) {
  return static_cast<T*>(t.data) + i0 * t.stride[0] + i1 * t.stride[1] + i2 * t.stride[2];
}

// Element (i0, i1, i2) of a rank-3 view (the LSE), any strides.
inline float& lse_at(const TensorView& t, std::int64_t i0, std::int64_t i1, std::int64_t i2) {
  return static_cast<float*>(t.data)[i0 * t.stride[0] + i1 * t.stride[1] + i2 * t.stride[2]];
}

template <typename Element>
void load_row(const Element* src, std::int64_t n, float* dst) {
  for (std::int64_t d = 0; d < n; ++d) dst[d] = static_cast<float>(src[d]);
}

template <typename Element>
void store_row(const float* src, std::int64_t n, float scale, Element* dst) {
  for (std::int64_t d = 0; d < n; ++d) dst[d] = static_cast<Element>(src[d] * scale);
}

}  // namespace flashcore::cpu
