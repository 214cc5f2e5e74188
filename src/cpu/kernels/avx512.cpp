// The AVX-512 kernel set (AVX-512F/BW/VL/DQ with FMA and F16C): 16-float vectors, masked loads
// and stores for ragged tile edges, a polynomial exp2. This file alone is compiled with AVX-512
// enabled, and select.cpp calls into it only on a CPU that has those features; it includes no
// header with inline functions that other files also instantiate, so no AVX-512 copy of a shared
// inline function can be picked by the linker for code that runs elsewhere.
#include <immintrin.h>

#include <cstdint>

#include "cpu/kernels/avx512_transpose.h"
#include "cpu/kernels/kernels.h"

namespace flashcore::cpu {
namespace {

using std::int64_t;

__mmask16 first_lanes(int64_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1u); }

// ---- products -------------------------------------------------------------------------------
// A (R, 16 * NV) block of c in registers across the whole k loop: per p, NV vectors of b serve R
// rows, each a broadcast of one A element into NV FMAs. R = 8, NV = 2 uses 16 accumulators of the
// 32 registers, enough independent FMAs to cover their latency. `last` masks the columns of the
// last vector (a ragged right edge); masked-off lanes are neither read nor written. kAccumulate
// false starts from 0 instead of c, so a score tile needs no fill before its product.
template <bool kAccumulate, int R, int NV>
inline __attribute__((always_inline)) void block(int64_t k, const float* __restrict a, int64_t a_row, int64_t a_col,
                                                 const float* __restrict b, int64_t ldb, float* __restrict c,
                                                 int64_t ldc, __mmask16 last) {
  __m512 acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v)
      acc[r][v] = kAccumulate ? _mm512_maskz_loadu_ps(v == NV - 1 ? last : __mmask16(0xffff), c + r * ldc + 16 * v)
                              : _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    __m512 bv[NV];
    for (int v = 0; v < NV; ++v)
      bv[v] = _mm512_maskz_loadu_ps(v == NV - 1 ? last : __mmask16(0xffff), b + p * ldb + 16 * v);
    for (int r = 0; r < R; ++r) {
      const __m512 ar = _mm512_set1_ps(a[r * a_row + p * a_col]);
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(ar, bv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v)
      _mm512_mask_storeu_ps(c + r * ldc + 16 * v, v == NV - 1 ? last : __mmask16(0xffff), acc[r][v]);
}

// All m rows of a (m, 16 * NV) column panel: blocks of 8 rows, then the remainder.
template <bool kAccumulate, int NV>
void panel(int64_t m, int64_t k, const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t ldb, float* c,
           int64_t ldc, __mmask16 last) {
  int64_t i = 0;
  for (; i + 8 <= m; i += 8) block<kAccumulate, 8, NV>(k, a + i * a_row, a_row, a_col, b, ldb, c + i * ldc, ldc, last);
  const float* ai = a + i * a_row;
  float* ci = c + i * ldc;
  switch (m - i) {
    case 7: block<kAccumulate, 7, NV>(k, ai, a_row, a_col, b, ldb, ci, ldc, last); break;
    case 6: block<kAccumulate, 6, NV>(k, ai, a_row, a_col, b, ldb, ci, ldc, last); break;
    case 5: block<kAccumulate, 5, NV>(k, ai, a_row, a_col, b, ldb, ci, ldc, last); break;
    case 4: block<kAccumulate, 4, NV>(k, ai, a_row, a_col, b, ldb, ci, ldc, last); break;
    case 3: block<kAccumulate, 3, NV>(k, ai, a_row, a_col, b, ldb, ci, ldc, last); break;
    case 2: block<kAccumulate, 2, NV>(k, ai, a_row, a_col, b, ldb, ci, ldc, last); break;
    case 1: block<kAccumulate, 1, NV>(k, ai, a_row, a_col, b, ldb, ci, ldc, last); break;
    default: break;
  }
}

template <bool kAccumulate>
void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t ldb,
          float* c, int64_t ldc) {
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) panel<kAccumulate, 2>(m, k, a, a_row, a_col, b + j, ldb, c + j, ldc, 0xffff);
  if (n - j > 16) {
    panel<kAccumulate, 2>(m, k, a, a_row, a_col, b + j, ldb, c + j, ldc, first_lanes(n - j - 16));
  } else if (n - j > 0) {
    panel<kAccumulate, 1>(m, k, a, a_row, a_col, b + j, ldb, c + j, ldc, first_lanes(n - j));
  }
}

// ---- conversions ----------------------------------------------------------------------------
// 16 (or the `mask`ed first few) elements at src as floats; masked-off lanes are 0 and not read.
inline __attribute__((always_inline)) __m512 load16(DType dtype, const void* src, __mmask16 mask) {
  switch (dtype) {
    case DType::kBFloat16: {
      const __m256i h = _mm256_maskz_loadu_epi16(mask, src);
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    case DType::kFloat16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, src));
    case DType::kFloat32:
    default: return _mm512_maskz_loadu_ps(mask, src);
  }
}

// Rounds to nearest even as cutlass::bfloat16_t does: NaN becomes 0x7fff, infinities stay.
inline __m256i to_bf16(__m512 x) {
  const __m512i bits = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __mmask16 inf = _mm512_cmpeq_epi32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  rounded = _mm512_mask_mov_epi32(rounded, inf, bits);
  rounded = _mm512_mask_mov_epi32(rounded, nan, _mm512_set1_epi32(0x7fff0000));
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(rounded, 16));
}

inline void store16(DType dtype, __m512 x, void* dst, __mmask16 mask) {
  switch (dtype) {
    case DType::kBFloat16: _mm256_mask_storeu_epi16(dst, mask, to_bf16(x)); break;
    case DType::kFloat16:
      _mm256_mask_storeu_epi16(dst, mask, _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      break;
    case DType::kFloat32:
    default: _mm512_mask_storeu_ps(dst, mask, x); break;
  }
}

constexpr int64_t element_bytes(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }

inline const void* offset(const void* p, int64_t elements, int64_t bytes) {
  return static_cast<const char*>(p) + elements * bytes;
}

template <DType kType>
void to_float_of(const void* src, int64_t n, float* dst) {
  const int64_t bytes = element_bytes(kType);
  for (int64_t e = 0; e < n; e += 16) {
    const __mmask16 mask = first_lanes(n - e);
    _mm512_mask_storeu_ps(dst + e, mask, load16(kType, offset(src, e, bytes), mask));
  }
}

void to_float(DType dtype, const void* src, int64_t n, float* dst) {
  switch (dtype) {
    case DType::kBFloat16: to_float_of<DType::kBFloat16>(src, n, dst); break;
    case DType::kFloat16: to_float_of<DType::kFloat16>(src, n, dst); break;
    case DType::kFloat32: to_float_of<DType::kFloat32>(src, n, dst); break;
    case DType::kInt32: break;  // index tensors never reach the tile kernels (validated away)
  }
}

template <DType kType>
void to_float_transposed_of(const void* src, int64_t row_stride, int64_t rows, int64_t cols, float* dst, int64_t ld) {
  const int64_t bytes = element_bytes(kType);
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    const int64_t block_rows = rows - r0 < 16 ? rows - r0 : 16;
    const __mmask16 row_mask = first_lanes(block_rows);
    for (int64_t d0 = 0; d0 < cols; d0 += 16) {
      const int64_t block_cols = cols - d0 < 16 ? cols - d0 : 16;
      const __mmask16 col_mask = first_lanes(block_cols);
      __m512 r[16];
      for (int j = 0; j < 16; ++j) {
        r[j] = j < block_rows ? load16(kType, offset(src, (r0 + j) * row_stride + d0, bytes), col_mask)
                              : _mm512_setzero_ps();
      }
      transpose16(r);
      for (int64_t i = 0; i < block_cols; ++i) _mm512_mask_storeu_ps(dst + (d0 + i) * ld + r0, row_mask, r[i]);
    }
  }
}

void to_float_transposed(DType dtype, const void* src, int64_t row_stride, int64_t rows, int64_t cols, float* dst,
                         int64_t ld) {
  switch (dtype) {
    case DType::kBFloat16: to_float_transposed_of<DType::kBFloat16>(src, row_stride, rows, cols, dst, ld); break;
    case DType::kFloat16: to_float_transposed_of<DType::kFloat16>(src, row_stride, rows, cols, dst, ld); break;
    case DType::kFloat32: to_float_transposed_of<DType::kFloat32>(src, row_stride, rows, cols, dst, ld); break;
    case DType::kInt32: break;  // index tensors never reach the tile kernels (validated away)
  }
}

void from_float(DType dtype, const float* src, int64_t n, float scale, void* dst) {
  const int64_t bytes = element_bytes(dtype);
  const __m512 s = _mm512_set1_ps(scale);
  for (int64_t e = 0; e < n; e += 16) {
    const __mmask16 mask = first_lanes(n - e);
    store16(dtype, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, src + e), s),
            static_cast<char*>(dst) + e * bytes, mask);
  }
}

// ---- softmax pieces -------------------------------------------------------------------------
// exp2(x) to ~1 ulp for x in [-200, 128] or NaN (callers clamp): x = n + f with n an integer and
// |f| <= 1/2, 2^f from a degree-6 polynomial fitted for relative error (1.9e-9 on [-1/2, 1/2],
// 0.8 ulp once evaluated in float; its constant term is exactly 1, so exp2(0) = 1 exactly), 2^n
// applied by scalef. Below -126 scalef goes to denormals and then exactly 0 (masked scores are
// -inf, clamped to -200); a NaN x stays NaN through every step.
inline __m512 exp2_clamped(__m512 x) {
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(1.5345810970757157e-04f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3399930903688073e-03f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618489071726799e-03f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550328642129898e-02f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022646248340607e-01f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931471824645996e-01f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// max/min return their second operand when either is NaN, so a NaN x stays NaN.
inline __m512 clamp_low(__m512 x) { return _mm512_max_ps(_mm512_set1_ps(-200.0f), x); }
inline __m512 clamp(__m512 x) { return _mm512_min_ps(_mm512_set1_ps(128.0f), clamp_low(x)); }

float max(const float* x, int64_t n) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 m = neg_inf;
  for (int64_t j = 0; j < n; j += 16) {
    // max_ps returns its second operand when either is NaN: a NaN x is skipped.
    m = _mm512_max_ps(_mm512_mask_loadu_ps(neg_inf, first_lanes(n - j), x + j), m);
  }
  return _mm512_reduce_max_ps(m);
}

constexpr float kLog2e = 1.4426950408889634f;

float exp_sum(float* x, int64_t n, float sub) {
  const __m512 s = _mm512_set1_ps(sub), log2e = _mm512_set1_ps(kLog2e);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 mask = first_lanes(n - j);
    // sub is the row's max, so x - sub <= 0 (or NaN, from an inf - inf): only the low clamp.
    const __m512 shifted = _mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + j), s);
    const __m512 e = exp2_clamped(clamp_low(_mm512_mul_ps(shifted, log2e)));
    _mm512_mask_storeu_ps(x + j, mask, e);
    sum = _mm512_mask_add_ps(sum, mask, sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

void scale(float* x, int64_t n, float factor) {
  const __m512 f = _mm512_set1_ps(factor);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 mask = first_lanes(n - j);
    _mm512_mask_storeu_ps(x + j, mask, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, x + j), f));
  }
}

void probabilities_dscores(float* s, float* dp, int64_t n, float lse, float delta) {
  const __m512 l = _mm512_set1_ps(lse), dl = _mm512_set1_ps(delta), log2e = _mm512_set1_ps(kLog2e);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 mask = first_lanes(n - j);
    const __m512 p = exp2_clamped(clamp(_mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, s + j), l), log2e)));
    const __m512 ds = _mm512_mul_ps(p, _mm512_sub_ps(_mm512_maskz_loadu_ps(mask, dp + j), dl));
    _mm512_mask_storeu_ps(s + j, mask, p);
    _mm512_mask_storeu_ps(dp + j, mask, ds);
  }
}

// One fused multiply-add at a time, in order: the same sums gemm_acc forms, so with one key
// (O = V) the backward's delta equals its dP = dO · V exactly and dS is an exact 0, as the plain
// formula gives. It runs once per query row, a small part of the backward.
float dot(DType dtype, const void* a, const void* b, int64_t n) {
  const int64_t bytes = element_bytes(dtype);
  float sum = 0.0f;
  alignas(64) float x[16];
  alignas(64) float y[16];
  for (int64_t e = 0; e < n; e += 16) {
    const __mmask16 mask = first_lanes(n - e);
    _mm512_store_ps(x, load16(dtype, offset(a, e, bytes), mask));
    _mm512_store_ps(y, load16(dtype, offset(b, e, bytes), mask));
    const int64_t lanes = n - e < 16 ? n - e : 16;
    for (int64_t l = 0; l < lanes; ++l) sum = __builtin_fmaf(x[l], y[l], sum);
  }
  return sum;
}

}  // namespace

// Only the table, with the bf16 products (avx512_bf16.cpp) when `bf16` is given: the feature
// check lives in select.cpp, compiled for the baseline CPU.
CpuKernels avx512_kernel_table(const Bf16Kernels* bf16) {
  return {"avx512", gemm<true>, gemm<false>, to_float, to_float_transposed, from_float, max, exp_sum,
          scale, probabilities_dscores, dot, bf16};
}

}  // namespace flashcore::cpu
