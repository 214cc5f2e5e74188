// 2^x evaluated on the FP32 FMA pipe instead of the MUFU unit.
//
// Why: at head dim 64 a score costs the tensor cores 256 FLOPs (QK^T and PV), about 1/16 of an
// H100 SM's cycle, and its exponential costs the MUFU unit (16 EX2 a cycle per SM) the same 1/16,
// so the two pipes tie and any imperfect overlap shows. The FMA pipe (128 lanes a cycle per SM) is
// mostly idle: evaluating a fraction of the exponentials here (FlashAttention-4's trick) takes
// that pressure off MUFU.
//
// How: x = j + f with j = round(x) (adding 1.5 * 2^23 + 127 rounds x to an integer whose value
// plus the exponent bias 127 sits in the low mantissa bits), 2^f on [-0.5, 0.5] by a degree-4
// polynomial (max relative error 2.7e-6 in fp32, below a fp16 P's rounding of 2.4e-4), and 2^j
// built as a float by shifting those bits into the exponent field. Cost: 4 FADD/FMUL-class +
// 4 FFMA on the FMA pipe, a max and a shift on the ALU pipe.
//
// Range: x is clamped to -127 first with a NaN-propagating max, so -inf (a masked score) gives
// 2^j = 0 and so exactly 0, as MUFU's ex2.approx.ftz does; results below 2^-126 flush to 0 (also
// as ftz); NaN stays NaN. Callers pass x <= ~0 (scores minus their row max), never > 127.
#pragma once

namespace flashcore::cuda {

__forceinline__ __device__ float exp2_fma(float x) {
  float xc;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(xc) : "f"(x), "f"(-127.0f));
  constexpr float kRoundBias = 12583039.0f;  // 1.5 * 2^23 + 127: ulp 1, so the add rounds to an integer
  const float t = __fadd_rn(xc, kRoundBias);  // low bits: round(xc) + 127
  const float j = __fadd_rn(t, -kRoundBias);  // round(xc), exactly
  const float f = __fadd_rn(xc, -j);          // in [-0.5, 0.5]
  // 2^f, minimax for relative error on [-0.5, 0.5] (Horner).
  float p = 9.570101276040077e-03f;
  p = __fmaf_rn(p, f, 5.591786280274391e-02f);
  p = __fmaf_rn(p, f, 2.402474433183670e-01f);
  p = __fmaf_rn(p, f, 6.931217908859253e-01f);
  p = __fmaf_rn(p, f, 9.999992847442627e-01f);
  // (round(xc) + 127) << 23 is 2^round(xc) as a float: 0 for xc = -127, a normal number above.
  const float scale = __int_as_float(__float_as_int(t) << 23);
  return p * scale;
}

}  // namespace flashcore::cuda
