// Tile products that skip masked entries instead of multiplying them by zero.
//
// A masked entry of P or dS is an exact 0, and the fast products in tile_gemm.h add 0 * x for it:
// harmless while x is finite, but 0 * inf and 0 * NaN are NaN, so a non-finite value in a key (or
// query) the row does not see would leak into the row's result. The plain formula never reads a
// masked key, so these products don't either. They are slower (one row at a time) and run only for
// a tile that is partly masked and whose other operand holds a NaN or an infinity (all_finite() in
// flash_tile.h decides); with finite operands both paths give the same sums.
//
// [begin[r], end[r]): the columns of row r of the masked operand that are live, the rest masked.
#pragma once

#include <cstdint>

#include "cpu/tile_gemm.h"

namespace flashcore::cpu {

// c (rows, n; ldc) += a (rows, cols; lda) · b (cols, n; ldb), row r of a read over [begin[r], end[r]).
inline void gemm_nn_acc_visible(std::int64_t rows, std::int64_t n, const float* a, std::int64_t lda, const float* b,
                                std::int64_t ldb, float* c, std::int64_t ldc, const std::int64_t* begin,
                                const std::int64_t* end) {
  for (std::int64_t r = 0; r < rows; ++r) {
    if (end[r] <= begin[r]) continue;
    gemm_nn_acc(1, n, end[r] - begin[r], a + r * lda + begin[r], lda, b + begin[r] * ldb, ldb, c + r * ldc, ldc);
  }
}

// c (cols, n; ldc) += aᵀ · b with a stored as (rows, cols; lda) and b as (rows, n; ldb), row r of a
// read over [begin[r], end[r]): row r adds into those rows of c only.
inline void gemm_tn_acc_visible(std::int64_t rows, std::int64_t n, const float* a, std::int64_t lda, const float* b,
                                std::int64_t ldb, float* c, std::int64_t ldc, const std::int64_t* begin,
                                const std::int64_t* end) {
  for (std::int64_t r = 0; r < rows; ++r) {
    if (end[r] <= begin[r]) continue;
    gemm_tn_acc(end[r] - begin[r], n, 1, a + r * lda + begin[r], lda, b + r * ldb, ldb, c + begin[r] * ldc, ldc);
  }
}

}  // namespace flashcore::cpu
