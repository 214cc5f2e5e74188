// The AVX-512 helpers both kernel sets (avx512.cpp, avx512_bf16.cpp) use. Included only by
// translation units built with the AVX-512 flags; the anonymous namespace gives each its own copy.
#pragma once

#include <immintrin.h>

namespace flashcore::cpu {
namespace {

// r[i] = column i of the 16 x 16 matrix of 32-bit elements whose row j was r[j]: unpack pairs of
// rows, then pairs of pairs, then two rounds of 128-bit lane shuffles (a 4 x 4 transpose of lanes).
// avx512_bf16.cpp transposes pairs of bf16 values with it.
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int k = 0; k < 16; k += 2) {
    t[k] = _mm512_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm512_unpackhi_ps(r[k], r[k + 1]);
  }
  __m512 u[16];  // u[4q + c], 128-bit lane L: column 4L + c of rows 4q .. 4q + 3
  for (int q = 0; q < 4; ++q) {
    const __m512d t0 = _mm512_castps_pd(t[4 * q]), t1 = _mm512_castps_pd(t[4 * q + 1]);
    const __m512d t2 = _mm512_castps_pd(t[4 * q + 2]), t3 = _mm512_castps_pd(t[4 * q + 3]);
    u[4 * q + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    u[4 * q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    u[4 * q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    u[4 * q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  for (int c = 0; c < 4; ++c) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44);
    const __m512 v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xee);
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44);
    const __m512 v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xee);
    r[c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    r[4 + c] = _mm512_shuffle_f32x4(v0, v2, 0xdd);
    r[8 + c] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(v1, v3, 0xdd);
  }
}

}  // namespace
}  // namespace flashcore::cpu
