// fp16 and bf16 storage types for callers' buffers, with conversions to and from float, so a C++
// program can fill and read flashcore's tensors without CUDA's or CUTLASS's headers.
//
//   std::vector<flashcore::Float16> q(n);
//   for (std::size_t i = 0; i < n; ++i) q[i] = flashcore::to_float16(values[i]);
//   auto view = flashcore::make_view(q.data(), flashcore::dtype_of<flashcore::Float16>(), ...);
//
// The types are two bytes with the IEEE / bfloat16 bit pattern and nothing else (arrays of them are
// the memory layout flashcore reads). Conversions from float round to nearest, ties to even, as the
// GPU kernels do when they store; values too large become ±inf; NaN stays NaN (quiet).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "flashcore/tensor.h"

namespace flashcore {

// IEEE 754 binary16: 1 sign, 5 exponent, 10 mantissa bits (DType::kFloat16).
struct Float16 {
  std::uint16_t bits = 0;
};

// bfloat16: the upper half of a float32, 1 sign, 8 exponent, 7 mantissa bits (DType::kBFloat16).
struct BFloat16 {
  std::uint16_t bits = 0;
};

static_assert(sizeof(Float16) == 2 && std::is_standard_layout_v<Float16> && std::is_trivially_copyable_v<Float16>);
static_assert(sizeof(BFloat16) == 2 && std::is_standard_layout_v<BFloat16> && std::is_trivially_copyable_v<BFloat16>);

// The DType of an element type: dtype_of<Float16>() == DType::kFloat16.
template <typename Element>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<Float16>() { return DType::kFloat16; }
template <>
constexpr DType dtype_of<BFloat16>() { return DType::kBFloat16; }
template <>
constexpr DType dtype_of<float>() { return DType::kFloat32; }

namespace detail {
inline std::uint32_t float_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}
inline float bits_float(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}
// `mantissa` >> `shift`, rounded to nearest with ties to even (shift >= 1).
inline std::uint32_t shift_round_even(std::uint32_t mantissa, int shift) {
  const std::uint32_t kept = mantissa >> shift;
  const std::uint32_t rest = mantissa & ((std::uint32_t{1} << shift) - 1);
  const std::uint32_t half = std::uint32_t{1} << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1))) ? 1 : 0);
}
}  // namespace detail

inline Float16 to_float16(float value) {
  const std::uint32_t bits = detail::float_bits(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  const int exponent = static_cast<int>(magnitude >> 23);  // float32's biased exponent
  const std::uint32_t mantissa = magnitude & 0x7fffffu;
  if (exponent == 0xff) {  // inf stays inf; NaN becomes a quiet NaN keeping the top payload bits
    const std::uint32_t nan_bits = mantissa != 0 ? 0x200u | (mantissa >> 13) : 0u;
    return Float16{static_cast<std::uint16_t>(sign | 0x7c00u | nan_bits)};
  }
  const int half_exponent = exponent - 127 + 15;
  if (half_exponent >= 0x1f) return Float16{static_cast<std::uint16_t>(sign | 0x7c00u)};  // >= 2^16: inf
  if (half_exponent >= 1) {
    // Normal: drop 13 mantissa bits; a carry out of the mantissa bumps the exponent, up to inf.
    const std::uint32_t rounded = detail::shift_round_even((static_cast<std::uint32_t>(half_exponent) << 23) | mantissa, 13);
    return Float16{static_cast<std::uint16_t>(sign | rounded)};
  }
  // Subnormal or zero: the result counts units of 2^-24; below 2^-25 (shift > 24) it rounds to 0.
  const int shift = 14 - half_exponent;  // >= 14
  if (exponent == 0 || shift > 24) return Float16{sign};
  return Float16{static_cast<std::uint16_t>(sign | detail::shift_round_even(mantissa | 0x800000u, shift))};
}

inline float to_float(Float16 value) {
  const std::uint32_t sign = static_cast<std::uint32_t>(value.bits & 0x8000u) << 16;
  const std::uint32_t exponent = (value.bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = value.bits & 0x3ffu;
  if (exponent == 0x1f) return detail::bits_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return detail::bits_float(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

inline BFloat16 to_bfloat16(float value) {
  const std::uint32_t bits = detail::float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it one (quiet), whatever the dropped bits
    return BFloat16{static_cast<std::uint16_t>((bits >> 16) | 0x40u)};
  }
  // Finite or inf: drop the low 16 bits, rounding to nearest even; a carry can reach inf, as it should.
  return BFloat16{static_cast<std::uint16_t>(detail::shift_round_even(bits, 16))};
}

inline float to_float(BFloat16 value) { return detail::bits_float(static_cast<std::uint32_t>(value.bits) << 16); }

}  // namespace flashcore
