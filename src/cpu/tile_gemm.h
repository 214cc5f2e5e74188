// The small float32 matrix products the CPU flash paths are built from: c (m, n) += A · b, with A
// read either as stored (gemm_nn_acc) or transposed (gemm_tn_acc).
//
// Each element of c sums its k products in order p = 0, 1, ..., k-1 whatever the blocking, so the
// result does not depend on tile shapes or thread counts. The inner loops are axpys over
// contiguous rows of b and c: a dot-product inner loop would be a floating-point reduction, which
// the compiler may not vectorise without reassociating (-ffast-math).
#pragma once

#include <cstdint>
#include <cstring>

namespace flashcore::cpu {
namespace tile_gemm_detail {

using std::int64_t;

// Four floats: an SSE register on any x86-64 (a NEON one on arm64), written with GCC/Clang vector
// extensions because the compiler does not reliably keep a plain float[4][8] accumulator in
// registers.
using Vec4 = float __attribute__((vector_size(16)));

inline Vec4 load4(const float* p) {
  Vec4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void store4(float* p, Vec4 v) { std::memcpy(p, &v, sizeof(v)); }

// A (4, 8) block of c held in registers across the whole k loop: each b row loaded once serves 4
// rows of c, each c element is loaded and stored once. 8 accumulators + 2 b vectors + a broadcast
// fit the 16 SSE registers.
inline constexpr int kRows = 4;
inline constexpr int kCols = 8;

// A(i, p) = a[i * a_row + p * a_col].
inline void block(int64_t k, const float* __restrict a, int64_t a_row, int64_t a_col, const float* __restrict b,
                  int64_t ldb, float* __restrict c, int64_t ldc) {
  Vec4 acc[kRows][2];
  for (int r = 0; r < kRows; ++r) {
    acc[r][0] = load4(c + r * ldc);
    acc[r][1] = load4(c + r * ldc + 4);
  }
  for (int64_t p = 0; p < k; ++p) {
    const Vec4 b0 = load4(b + p * ldb);
    const Vec4 b1 = load4(b + p * ldb + 4);
    for (int r = 0; r < kRows; ++r) {
      const float ar = a[r * a_row + p * a_col];
      acc[r][0] += ar * b0;
      acc[r][1] += ar * b1;
    }
  }
  for (int r = 0; r < kRows; ++r) {
    store4(c + r * ldc, acc[r][0]);
    store4(c + r * ldc + 4, acc[r][1]);
  }
}

// Rows and columns the blocks do not cover (ragged tile edges), one element at a time.
inline void edge(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col, const float* b,
                 int64_t ldb, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float sum = c[i * ldc + j];
      for (int64_t p = 0; p < k; ++p) sum += a[i * a_row + p * a_col] * b[p * ldb + j];
      c[i * ldc + j] = sum;
    }
}

inline void gemm_acc(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col, const float* b,
                     int64_t ldb, float* c, int64_t ldc) {
  const int64_t m_full = m / kRows * kRows;
  const int64_t n_full = n / kCols * kCols;
  for (int64_t i = 0; i < m_full; i += kRows) {
    for (int64_t j = 0; j < n_full; j += kCols) block(k, a + i * a_row, a_row, a_col, b + j, ldb, c + i * ldc + j, ldc);
  }
  edge(m_full, n - n_full, k, a, a_row, a_col, b + n_full, ldb, c + n_full, ldc);
  edge(m - m_full, n, k, a + m_full * a_row, a_row, a_col, b, ldb, c + m_full * ldc, ldc);
}

}  // namespace tile_gemm_detail

// c (m, n; ldc) += a (m, k; lda) · b (k, n; ldb).
inline void gemm_nn_acc(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
                        const float* b, std::int64_t ldb, float* c, std::int64_t ldc) {
  tile_gemm_detail::gemm_acc(m, n, k, a, lda, 1, b, ldb, c, ldc);
}

// c (m, n; ldc) += aᵀ · b, with a stored as (k, m; lda) and b as (k, n; ldb).
inline void gemm_tn_acc(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
                        const float* b, std::int64_t ldb, float* c, std::int64_t ldc) {
  tile_gemm_detail::gemm_acc(m, n, k, a, 1, lda, b, ldb, c, ldc);
}

}  // namespace flashcore::cpu
