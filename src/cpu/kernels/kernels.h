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

// Products of bf16 tiles with fp32 accumulation (AVX512_BF16's vdpbf16ps: two products a lane
// per instruction, twice the fp32 FMA rate). An operand read along k comes in pairs: a uint32 holds
// elements k = 2p and 2p + 1 of one row or column, the low half first; an odd k is padded with 0.
struct Bf16Kernels {
  // c (m, n; ldc) += A · B, A (m, 2 kp) bf16 row-major (lda elements, even), B as pairs:
  // b[p * ldb + j] = (B(2p, j), B(2p + 1, j)).
  void (*gemm_acc)(std::int64_t m, std::int64_t n, std::int64_t kp, const std::uint16_t* a, std::int64_t lda,
                   const std::uint32_t* b, std::int64_t ldb, float* c, std::int64_t ldc);
  // Rows r < rows of a strided bf16 tensor (row r at src + r * row_stride), as B = their transpose:
  // dst[p * ld + r] = (row r [2p], row r [2p + 1]) for 2p < cols.
  void (*pack_transposed)(const std::uint16_t* src, std::int64_t row_stride, std::int64_t rows, std::int64_t cols,
                          std::uint32_t* dst, std::int64_t ld);
  // The same rows as B itself: dst[q * ld + d] = (row 2q [d], row 2q + 1 [d]) for 2q < rows.
  void (*pack_rows)(const std::uint16_t* src, std::int64_t row_stride, std::int64_t rows, std::int64_t cols,
                    std::uint32_t* dst, std::int64_t ld);
  // dst[0, n) = src[0, n) rounded to bf16 (nearest even).
  void (*round)(const float* src, std::int64_t n, std::uint16_t* dst);
  // dst[j * ld + i] = src[i * src_ld + j] rounded, for j < cols and i < rows rounded up to even
  // (the padding row, i = rows when rows is odd, is 0): a float tile as its bf16 transpose.
  void (*round_transposed)(const float* src, std::int64_t src_ld, std::int64_t rows, std::int64_t cols,
                           std::uint16_t* dst, std::int64_t ld);
};

struct CpuKernels {
  const char* name;

  // c (m, n; ldc) += A · b with A(i, p) = a[i * a_row + p * a_col] (m, k) and b (k, n; ldb).
  void (*gemm_acc)(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row,
                   std::int64_t a_col, const float* b, std::int64_t ldb, float* c, std::int64_t ldc);
  // c (m, n; ldc) = A · b, the same sums written over c (no fill of c needed before).
  void (*gemm)(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row, std::int64_t a_col,
               const float* b, std::int64_t ldb, float* c, std::int64_t ldc);

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

  // bf16 tile products where the CPU has them (AVX512_BF16), else null.
  const Bf16Kernels* bf16;
};

// The set this process uses, chosen on first call (thread-safe).
const CpuKernels& cpu_kernels();

// Each set, for tests and benchmarks; avx512 is null where not built or not supported.
const CpuKernels& portable_kernels();
const CpuKernels* avx512_kernels();  // with bf16 set where the CPU has AVX512_BF16

}  // namespace flashcore::cpu
