// The bf16 tile products of the AVX-512 set, for CPUs with AVX512_BF16 (kernels.h: Bf16Kernels).
// Compiled with AVX512_BF16 enabled and called only where select.cpp found it; like avx512.cpp it
// includes no header whose inline functions other files also instantiate.
#include <immintrin.h>

#include <cstdint>

#include "cpu/kernels/avx512_transpose.h"
#include "cpu/kernels/kernels.h"

namespace flashcore::cpu {
namespace {

using std::int64_t;
using std::uint16_t;
using std::uint32_t;

__mmask16 first_lanes(int64_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1u); }
__mmask32 first_halves(int64_t n) { return n >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << n) - 1u); }

// As avx512.cpp's block, with one vdpbf16ps (two products a lane) per A pair and B vector.
template <int R, int NV>
inline __attribute__((always_inline)) void block(int64_t kp, const uint16_t* __restrict a, int64_t lda,
                                                 const uint32_t* __restrict b, int64_t ldb, float* __restrict c,
                                                 int64_t ldc, __mmask16 last) {
  __m512 acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v)
      acc[r][v] = _mm512_maskz_loadu_ps(v == NV - 1 ? last : __mmask16(0xffff), c + r * ldc + 16 * v);
  for (int64_t p = 0; p < kp; ++p) {
    __m512bh bv[NV];
    for (int v = 0; v < NV; ++v)
      bv[v] = (__m512bh)_mm512_maskz_loadu_epi32(v == NV - 1 ? last : __mmask16(0xffff), b + p * ldb + 16 * v);
    for (int r = 0; r < R; ++r) {
      uint32_t pair;
      __builtin_memcpy(&pair, a + r * lda + 2 * p, sizeof(pair));
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], ar, bv[v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v)
      _mm512_mask_storeu_ps(c + r * ldc + 16 * v, v == NV - 1 ? last : __mmask16(0xffff), acc[r][v]);
}

template <int NV>
void panel(int64_t m, int64_t kp, const uint16_t* a, int64_t lda, const uint32_t* b, int64_t ldb, float* c,
           int64_t ldc, __mmask16 last) {
  int64_t i = 0;
  for (; i + 8 <= m; i += 8) block<8, NV>(kp, a + i * lda, lda, b, ldb, c + i * ldc, ldc, last);
  const uint16_t* ai = a + i * lda;
  float* ci = c + i * ldc;
  switch (m - i) {
    case 7: block<7, NV>(kp, ai, lda, b, ldb, ci, ldc, last); break;
    case 6: block<6, NV>(kp, ai, lda, b, ldb, ci, ldc, last); break;
    case 5: block<5, NV>(kp, ai, lda, b, ldb, ci, ldc, last); break;
    case 4: block<4, NV>(kp, ai, lda, b, ldb, ci, ldc, last); break;
    case 3: block<3, NV>(kp, ai, lda, b, ldb, ci, ldc, last); break;
    case 2: block<2, NV>(kp, ai, lda, b, ldb, ci, ldc, last); break;
    case 1: block<1, NV>(kp, ai, lda, b, ldb, ci, ldc, last); break;
    default: break;
  }
}

void gemm_acc(int64_t m, int64_t n, int64_t kp, const uint16_t* a, int64_t lda, const uint32_t* b, int64_t ldb,
              float* c, int64_t ldc) {
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) panel<2>(m, kp, a, lda, b + j, ldb, c + j, ldc, 0xffff);
  if (n - j > 16) {
    panel<2>(m, kp, a, lda, b + j, ldb, c + j, ldc, first_lanes(n - j - 16));
  } else if (n - j > 0) {
    panel<1>(m, kp, a, lda, b + j, ldb, c + j, ldc, first_lanes(n - j));
  }
}


void pack_transposed(const uint16_t* src, int64_t row_stride, int64_t rows, int64_t cols, uint32_t* dst, int64_t ld) {
  const int64_t pairs = (cols + 1) / 2;
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    const int64_t block_rows = rows - r0 < 16 ? rows - r0 : 16;
    const __mmask16 row_mask = first_lanes(block_rows);
    for (int64_t p0 = 0; p0 < pairs; p0 += 16) {
      const __mmask32 col_mask = first_halves(cols - 2 * p0);  // an odd cols' last pair gets a 0
      __m512 r[16];
      for (int j = 0; j < 16; ++j) {
        r[j] = j < block_rows
                   ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(col_mask, src + (r0 + j) * row_stride + 2 * p0))
                   : _mm512_setzero_ps();
      }
      transpose16(r);
      const int64_t block_pairs = pairs - p0 < 16 ? pairs - p0 : 16;
      for (int64_t i = 0; i < block_pairs; ++i) {
        _mm512_mask_storeu_ps(reinterpret_cast<float*>(dst + (p0 + i) * ld + r0), row_mask, r[i]);
      }
    }
  }
}

void pack_rows(const uint16_t* src, int64_t row_stride, int64_t rows, int64_t cols, uint32_t* dst, int64_t ld) {
  for (int64_t q = 0; 2 * q < rows; ++q) {
    const uint16_t* lo = src + 2 * q * row_stride;
    const uint16_t* hi = lo + row_stride;
    const bool has_hi = 2 * q + 1 < rows;
    for (int64_t d = 0; d < cols; d += 16) {
      const __mmask16 mask = first_lanes(cols - d);
      const __m512i l = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, lo + d));
      const __m512i h = has_hi ? _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, hi + d)), 16)
                               : _mm512_setzero_si512();
      _mm512_mask_storeu_epi32(dst + q * ld + d, mask, _mm512_or_si512(l, h));
    }
  }
}

// Nearest even, as cutlass::bfloat16_t rounds (NaN becomes 0x7fff): 16 results as 32-bit lanes.
inline __m512i to_bf16(__m512 x) {
  const __m512i bits = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __mmask16 inf = _mm512_cmpeq_epi32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  rounded = _mm512_mask_mov_epi32(rounded, inf, bits);
  rounded = _mm512_mask_mov_epi32(rounded, nan, _mm512_set1_epi32(0x7fff0000));
  return _mm512_srli_epi32(rounded, 16);
}

void round(const float* src, int64_t n, uint16_t* dst) {
  for (int64_t e = 0; e < n; e += 16) {
    const __mmask16 mask = first_lanes(n - e);
    _mm512_mask_cvtepi32_storeu_epi16(dst + e, mask, to_bf16(_mm512_maskz_loadu_ps(mask, src + e)));
  }
}

void round_transposed(const float* src, int64_t src_ld, int64_t rows, int64_t cols, uint16_t* dst, int64_t ld) {
  const int64_t rows_even = rows + rows % 2;
  for (int64_t i0 = 0; i0 < rows_even; i0 += 16) {
    const int64_t block_rows = rows - i0 < 16 ? rows - i0 : 16;
    const __mmask16 store_mask = first_lanes(rows_even - i0);
    for (int64_t j0 = 0; j0 < cols; j0 += 16) {
      const int64_t block_cols = cols - j0 < 16 ? cols - j0 : 16;
      const __mmask16 col_mask = first_lanes(block_cols);
      __m512 r[16];
      for (int i = 0; i < 16; ++i) {
        r[i] = i < block_rows ? _mm512_maskz_loadu_ps(col_mask, src + (i0 + i) * src_ld + j0) : _mm512_setzero_ps();
      }
      transpose16(r);
      for (int64_t j = 0; j < block_cols; ++j) {
        _mm512_mask_cvtepi32_storeu_epi16(dst + (j0 + j) * ld + i0, store_mask, to_bf16(r[j]));
      }
    }
  }
}

constexpr Bf16Kernels kBf16{gemm_acc, pack_transposed, pack_rows, round, round_transposed};

}  // namespace

const Bf16Kernels& avx512_bf16_kernel_table() { return kBf16; }

}  // namespace flashcore::cpu
