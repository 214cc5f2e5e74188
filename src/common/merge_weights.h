// The per-row arithmetic of merge_partials (flashcore/merge.h), shared by the CPU and CUDA
// backends so both give the same answer for the same inputs, special values included.
#pragma once

#include <math.h>  // expf, logf and INFINITY, on the host and (as CUDA builtins) the device

#if defined(__CUDACC__)
#define FLASHCORE_HOST_DEVICE __host__ __device__
#else
#define FLASHCORE_HOST_DEVICE
#endif

namespace flashcore {

// The merged LSE and the weight of each side: out = weight_a * out_a + weight_b * out_b, where a
// side of weight exactly 0 adds nothing (not 0 * its value: a row that saw no key in a block has
// nothing there to read).
struct MergeWeights {
  float lse;
  float weight_a;
  float weight_b;
};

// lse = m + log(exp(lse_a - m) + exp(lse_b - m)) with m the larger LSE, so the sum lies in [1, 2]
// and nothing overflows. Both -inf (the row saw no key): weights 0 and lse -inf, so out is 0.
// NaN on either side falls through the arithmetic as NaN (fmaxf would hide it, so m is chosen
// with a comparison that keeps it: m is NaN or lse_a - m is); so does +inf, through inf - inf.
FLASHCORE_HOST_DEVICE inline MergeWeights merge_weights(float lse_a, float lse_b) {
  const float m = lse_a > lse_b ? lse_a : lse_b;
  if (m == -INFINITY && lse_a == -INFINITY) return {-INFINITY, 0.0f, 0.0f};  // (lse_a NaN is not this)
  const float ea = expf(lse_a - m);  // NaN if lse_a or m is NaN
  const float eb = expf(lse_b - m);
  const float lse = m + logf(ea + eb);
  const float inv = 1.0f / (ea + eb);
  return {lse, ea * inv, eb * inv};
}

// One merged element.
FLASHCORE_HOST_DEVICE inline float merge_value(const MergeWeights& w, float a, float b) {
  return (w.weight_a != 0.0f ? w.weight_a * a : 0.0f) + (w.weight_b != 0.0f ? w.weight_b * b : 0.0f);
}

}  // namespace flashcore
