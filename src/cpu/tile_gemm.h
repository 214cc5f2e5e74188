// The small float32 matrix products the CPU flash paths are built from: c (m, n) += A · b, with A
// read either as stored (gemm_nn_acc) or transposed (gemm_tn_acc), and c = A · b (gemm_nn). They
// run on the kernel set chosen for this CPU (kernels/kernels.h): each element of c sums its k
// products in order p = 0, 1, ..., k-1 whatever the blocking, so results do not depend on tile
// shapes or threads, and gemm_nn gives the same values as a fill with 0 and gemm_nn_acc.
#pragma once

#include <cstdint>

#include "cpu/kernels/kernels.h"

namespace flashcore::cpu {

// c (m, n; ldc) += a (m, k; lda) · b (k, n; ldb).
inline void gemm_nn_acc(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
                        const float* b, std::int64_t ldb, float* c, std::int64_t ldc) {
  cpu_kernels().gemm_acc(m, n, k, a, lda, 1, b, ldb, c, ldc);
}

// c (m, n; ldc) = a (m, k; lda) · b (k, n; ldb), written over c.
inline void gemm_nn(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda, const float* b,
                    std::int64_t ldb, float* c, std::int64_t ldc) {
  cpu_kernels().gemm(m, n, k, a, lda, 1, b, ldb, c, ldc);
}

// c (m, n; ldc) += aᵀ · b, with a stored as (k, m; lda) and b as (k, n; ldb).
inline void gemm_tn_acc(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
                        const float* b, std::int64_t ldb, float* c, std::int64_t ldc) {
  cpu_kernels().gemm_acc(m, n, k, a, 1, lda, b, ldb, c, ldc);
}

}  // namespace flashcore::cpu
