// Host-side element access for the CPU backends: the fp16/bf16/fp32 tag -> C++ type dispatch,
// strided row addressing, and row conversions to and from float (round-to-nearest-even, the same
// rounding the GPU kernels apply when they store) on the kernel set chosen for this CPU.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cutlass/numeric_types.h>

#include "cpu/kernels/kernels.h"
#include "flashcore/tensor.h"

namespace flashcore::cpu {

// Calls f(Element{}) with Element = cutlass::half_t, cutlass::bfloat16_t or float. Validation
// admits only these three for q-like tensors on the CPU.
template <typename F>
decltype(auto) dispatch_element(DType dtype, F&& f) {
  if (dtype == DType::kBFloat16) return f(cutlass::bfloat16_t{});
  if (dtype == DType::kFloat32) return f(float{});
  return f(cutlass::half_t{});
}

template <typename Element>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<Element, cutlass::bfloat16_t>) return DType::kBFloat16;
  else if constexpr (std::is_same_v<Element, float>) return DType::kFloat32;
  else return DType::kFloat16;
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
  cpu_kernels().to_float(dtype_of<Element>(), src, n, dst);
}

template <typename Element>
void store_row(const float* src, std::int64_t n, float scale, Element* dst) {
  cpu_kernels().from_float(dtype_of<Element>(), src, n, scale, dst);
}

}  // namespace flashcore::cpu
