// flashcore/half.h's public fp16/bf16 conversions against CUTLASS's (cutlass::half_t,
// cutlass::bfloat16_t: what the CPU backend and the kernels round with): every fp16/bf16 bit
// pattern to float, and floats to fp16/bf16 at every rounding boundary and on a sweep of all
// exponents. NaN must stay NaN; every other result must have the same bits.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <cutlass/numeric_types.h>
#include <gtest/gtest.h>

#include "flashcore/half.h"

namespace {

float from_bits(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

std::uint32_t to_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// Floats that exercise rounding: for each 16-bit pattern p, the float p << shift (exactly
// representable), the midpoint to the next pattern and one float ulp either side of it; plus a
// sweep over every exponent with a varied mantissa.
std::vector<float> rounding_cases(int shift) {
  std::vector<float> cases;
  for (std::uint32_t p = 0; p < 0x10000u; ++p) {
    const std::uint32_t base = p << shift;
    const std::uint32_t mid = base + (1u << (shift - 1));
    for (std::uint32_t bits : {base, mid - 1, mid, mid + 1}) cases.push_back(from_bits(bits));
  }
  for (std::uint32_t bits = 0; bits < 0xffffffffu - 7919u * 4096u; bits += 7919u * 4096u + 17u) {
    cases.push_back(from_bits(bits));
  }
  cases.push_back(65504.0f);
  cases.push_back(65519.99f);
  cases.push_back(65520.0f);
  cases.push_back(std::numeric_limits<float>::infinity());
  cases.push_back(-std::numeric_limits<float>::infinity());
  cases.push_back(std::numeric_limits<float>::denorm_min());
  return cases;
}

TEST(PublicHalf, Float16ToFloatMatchesCutlassForEveryPattern) {
  for (std::uint32_t p = 0; p < 0x10000u; ++p) {
    const float ours = flashcore::to_float(flashcore::Float16{static_cast<std::uint16_t>(p)});
    const float theirs = static_cast<float>(cutlass::half_t::bitcast(static_cast<std::uint16_t>(p)));
    if (std::isnan(theirs)) {
      ASSERT_TRUE(std::isnan(ours)) << "pattern " << p;
    } else {
      ASSERT_EQ(to_bits(ours), to_bits(theirs)) << "pattern " << p;
    }
  }
}

TEST(PublicHalf, BFloat16ToFloatMatchesCutlassForEveryPattern) {
  for (std::uint32_t p = 0; p < 0x10000u; ++p) {
    const float ours = flashcore::to_float(flashcore::BFloat16{static_cast<std::uint16_t>(p)});
    const float theirs = static_cast<float>(cutlass::bfloat16_t::bitcast(static_cast<std::uint16_t>(p)));
    if (std::isnan(theirs)) {
      ASSERT_TRUE(std::isnan(ours)) << "pattern " << p;
    } else {
      ASSERT_EQ(to_bits(ours), to_bits(theirs)) << "pattern " << p;
    }
  }
}

TEST(PublicHalf, FloatToFloat16RoundsLikeCutlass) {
  // fp16 patterns sit 13 bits apart in a float's mantissa; boundaries of the subnormal range are
  // covered by the exponent sweep and the fp16 -> float -> fp16 round trip below.
  for (float x : rounding_cases(13)) {
    const std::uint16_t ours = flashcore::to_float16(x).bits;
    const cutlass::half_t theirs(x);
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(flashcore::to_float(flashcore::Float16{ours}))) << x;
    } else {
      ASSERT_EQ(ours, theirs.raw()) << "x = " << x << " (bits " << to_bits(x) << ")";
    }
  }
  for (std::uint32_t p = 0; p < 0x10000u; ++p) {
    const float x = flashcore::to_float(flashcore::Float16{static_cast<std::uint16_t>(p)});
    if (std::isnan(x)) continue;
    ASSERT_EQ(flashcore::to_float16(x).bits, p) << "round trip of pattern " << p;
    const float next = std::nextafter(x, 0.0f);  // just inside a subnormal or normal step
    ASSERT_EQ(flashcore::to_float16(next).bits, cutlass::half_t(next).raw()) << next;
  }
}

TEST(PublicHalf, FloatToBFloat16RoundsLikeCutlass) {
  for (float x : rounding_cases(16)) {
    const std::uint16_t ours = flashcore::to_bfloat16(x).bits;
    const cutlass::bfloat16_t theirs(x);
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(flashcore::to_float(flashcore::BFloat16{ours}))) << "bits " << to_bits(x);
    } else {
      ASSERT_EQ(ours, theirs.raw()) << "x = " << x << " (bits " << to_bits(x) << ")";
    }
  }
}

TEST(PublicHalf, DTypeOf) {
  static_assert(flashcore::dtype_of<flashcore::Float16>() == flashcore::DType::kFloat16);
  static_assert(flashcore::dtype_of<flashcore::BFloat16>() == flashcore::DType::kBFloat16);
  static_assert(flashcore::dtype_of<float>() == flashcore::DType::kFloat32);
}

}  // namespace
