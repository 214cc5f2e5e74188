// The portable kernel set: plain C++ plus 4-wide GCC/Clang vector extensions (an SSE register on
// any x86-64, a NEON one on aarch64), for CPUs without a specialised set.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <cutlass/numeric_types.h>

#include "cpu/kernels/kernels.h"

namespace flashcore::cpu {
namespace {

using std::int64_t;

// Four floats, written with vector extensions because the compiler does not reliably keep a plain
// float[4][8] accumulator in registers.
using Vec4 = float __attribute__((vector_size(16)));

Vec4 load4(const float* p) {
  Vec4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
void store4(float* p, Vec4 v) { std::memcpy(p, &v, sizeof(v)); }

// A (4, 8) block of c held in registers across the whole k loop: each b row loaded once serves 4
// rows of c. 8 accumulators + 2 b vectors + a broadcast fit the 16 SSE registers.
constexpr int kRows = 4;
constexpr int kCols = 8;

void block(int64_t k, const float* __restrict a, int64_t a_row, int64_t a_col, const float* __restrict b, int64_t ldb,
           float* __restrict c, int64_t ldc) {
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
void edge(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t ldb,
          float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float sum = c[i * ldc + j];
      for (int64_t p = 0; p < k; ++p) sum += a[i * a_row + p * a_col] * b[p * ldb + j];
      c[i * ldc + j] = sum;
    }
}

void gemm_acc(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col, const float* b,
              int64_t ldb, float* c, int64_t ldc) {
  const int64_t m_full = m / kRows * kRows;
  const int64_t n_full = n / kCols * kCols;
  for (int64_t i = 0; i < m_full; i += kRows) {
    for (int64_t j = 0; j < n_full; j += kCols) block(k, a + i * a_row, a_row, a_col, b + j, ldb, c + i * ldc + j, ldc);
  }
  edge(m_full, n - n_full, k, a, a_row, a_col, b + n_full, ldb, c + n_full, ldc);
  edge(m - m_full, n, k, a + m_full * a_row, a_row, a_col, b, ldb, c + m_full * ldc, ldc);
}

// c = A · b: c's (m, n) block zeroed, then the accumulating product (the same sums).
void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t ldb,
          float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
  gemm_acc(m, n, k, a, a_row, a_col, b, ldb, c, ldc);
}

// Calls f(Element{}) for the dtype's element type.
template <typename F>
void with_element(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBFloat16: f(cutlass::bfloat16_t{}); break;
    case DType::kFloat16: f(cutlass::half_t{}); break;
    case DType::kFloat32: f(float{}); break;
    case DType::kInt32: break;  // index tensors only; never an attention operand
  }
}

void to_float(DType dtype, const void* src, int64_t n, float* dst) {
  with_element(dtype, [&](auto tag) {
    using Element = decltype(tag);
    const Element* s = static_cast<const Element*>(src);
    for (int64_t e = 0; e < n; ++e) dst[e] = static_cast<float>(s[e]);
  });
}

void to_float_transposed(DType dtype, const void* src, int64_t row_stride, int64_t rows, int64_t cols, float* dst,
                         int64_t ld) {
  with_element(dtype, [&](auto tag) {
    using Element = decltype(tag);
    for (int64_t r = 0; r < rows; ++r) {
      const Element* s = static_cast<const Element*>(src) + r * row_stride;
      for (int64_t d = 0; d < cols; ++d) dst[d * ld + r] = static_cast<float>(s[d]);
    }
  });
}

void from_float(DType dtype, const float* src, int64_t n, float scale, void* dst) {
  with_element(dtype, [&](auto tag) {
    using Element = decltype(tag);
    Element* d = static_cast<Element*>(dst);
    for (int64_t e = 0; e < n; ++e) d[e] = static_cast<Element>(src[e] * scale);
  });
}

float max(const float* x, int64_t n) {
  float m = -INFINITY;
  for (int64_t j = 0; j < n; ++j) m = std::max(m, x[j]);
  return m;
}

constexpr float kLog2e = 1.4426950408889634f;

// exp as exp2 of the argument times log2(e): the same arithmetic as the AVX-512 set.
float exp_sum(float* x, int64_t n, float sub) {
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    x[j] = std::exp2((x[j] - sub) * kLog2e);
    sum += x[j];
  }
  return sum;
}

void scale(float* x, int64_t n, float factor) {
  for (int64_t j = 0; j < n; ++j) x[j] *= factor;
}

void probabilities_dscores(float* s, float* dp, int64_t n, float lse, float delta) {
  for (int64_t j = 0; j < n; ++j) {
    s[j] = std::exp2((s[j] - lse) * kLog2e);
    dp[j] = s[j] * (dp[j] - delta);
  }
}

float dot(DType dtype, const void* a, const void* b, int64_t n) {
  float sum = 0.0f;
  with_element(dtype, [&](auto tag) {
    using Element = decltype(tag);
    const Element* x = static_cast<const Element*>(a);
    const Element* y = static_cast<const Element*>(b);
    for (int64_t d = 0; d < n; ++d) sum += static_cast<float>(x[d]) * static_cast<float>(y[d]);
  });
  return sum;
}

}  // namespace

const CpuKernels& portable_kernels() {
  static const CpuKernels kernels{"portable", gemm_acc, gemm, to_float, to_float_transposed, from_float, max, exp_sum,
                                  scale, probabilities_dscores, dot, nullptr};
  return kernels;
}

}  // namespace flashcore::cpu
