// Rotary embedding of one element, as flashcore/kvcache.h defines it (flash_attn's rule), for the
// decode kernels of every family: column `col` of row `x` rotated by the cos/sin row of its
// position. Interleaved: pairs (2i, 2i+1) share angle i (GPT-J); otherwise (i, i + rotary_dim/2)
// (GPT-NeoX). Columns at or past rotary_dim are returned as they are. fp32 arithmetic.
#pragma once

namespace flashcore::cuda {

template <typename Element>
__device__ __forceinline__ float rotated_element(const Element* x, int col, const Element* cos_row,
                                                 const Element* sin_row, int rotary_dim, bool interleaved) {
  const float value = static_cast<float>(x[col]);
  if (col >= rotary_dim) return value;
  const int half = rotary_dim / 2;
  // The pair's first element becomes x_a cos - x_b sin, its second x_a sin + x_b cos.
  const bool first = interleaved ? (col & 1) == 0 : col < half;
  const int angle = interleaved ? col >> 1 : (first ? col : col - half);
  const int partner = interleaved ? col ^ 1 : (first ? col + half : col - half);
  const float c = static_cast<float>(cos_row[angle]);
  const float s = static_cast<float>(sin_row[angle]);
  const float other = static_cast<float>(x[partner]);
  return first ? value * c - other * s : value * c + other * s;
}

}  // namespace flashcore::cuda
