// The arithmetic the CPU flash paths are built from, as a table of functions chosen once per
// process from the CPU's features: an AVX-512 set (avx512.cpp) where the CPU has AVX-512F/BW/VL/DQ,
// else a portable one (portable.cpp) that builds and runs on any x86-64 or aarch64.
// FLASHCORE_CPU_KERNELS=portable forces the portable set (tests run both).
//
// Every set keeps the same contracts, so the flash paths' results do not depend on threads or
// tiling: each element of a product sums its k terms in order p = 0, 1, ..., k-1 (FMA or not is
// the set's choice), and conversions round to nearest even as CUTLASS's half_t/bfloat16_t do.
#pragma once

#include <cstdint>

#include "flashcore/tensor.h"

namespace flashcore::cpu {

struct CpuKernels {
  const char* name;

  // c (m, n; ldc) += A · b with A(i, p) = a[i * a_row + p * a_col] (m, k) and b (k, n; ldb).
  void (*gemm_acc)(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row,
                   std::int64_t a_col, const float* b, std::int64_t ldb, float* c, std::int64_t ldc);

  // dst[0, n) = src[0, n) as float; src holds `dtype` elements (fp16, bf16 or fp32).
  void (*to_float)(DType dtype, const void* src, std::int64_t n, float* dst);

  // dst[d * ld + r] = src row r's element d for r < rows, d < cols, with row r at element offset
  // r * row_stride from src: rows of a strided tensor as a transposed float tile.
  void (*to_float_transposed)(DType dtype, const void* src, std::int64_t row_stride, std::int64_t rows,
                              std::int64_t cols, float* dst, std::int64_t ld);

  // dst[0, n) = src[0, n) * scale, rounded to `dtype`.
  void (*from_float)(DType dtype, const float* src, std::int64_t n, float scale, void* dst);

  // The largest of x[0, n), skipping NaN as std::max(max, x) does; -inf when n is 0 or all NaN.
  float (*max)(const float* x, std::int64_t n);

  // x[j] = exp(x[j] - sub) for j < n, and their sum (any order). exp(-inf) is 0, NaN stays NaN.
  float (*exp_sum)(float* x, std::int64_t n, float sub);

  // x[j] *= factor.
  void (*scale)(float* x, std::int64_t n, float factor);

  // The backward's P and dS for one row: s[j] = exp(s[j] - lse), dp[j] = s[j] * (dp[j] - delta),
  // for j < n.
  void (*probabilities_dscores)(float* s, float* dp, std::int64_t n, float lse, float delta);

  // sum a[j] * b[j] over j < n, both `dtype` elements: the backward's rowsum(dO * O). Summed in
  // order j = 0, 1, ..., as gemm_acc sums (fused or not alike), so that with one key it equals dP.
  float (*dot)(DType dtype, const void* a, const void* b, std::int64_t n);
};

// The set this process uses, chosen on first call (thread-safe).
const CpuKernels& cpu_kernels();

// Each set, for tests and benchmarks; avx512 is null where not built or not supported.
const CpuKernels& portable_kernels();
const CpuKernels* avx512_kernels();

}  // namespace flashcore::cpu
