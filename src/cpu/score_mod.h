// The score options of the CPU flash paths (attention.h): softcap and ALiBi turn a raw q·k into
//   s = softcap * tanh(scale * q·k / softcap)   (or scale * q·k without softcap)
//       - slope * |i + seqlen_k - seqlen_q - j|  (ALiBi)
// which the softmax then takes with scale 1. Without either option the paths keep their plain
// arithmetic (q pre-scaled by scale * log2(e)); this is used only when problem.has_score_mod().
// The float64 reference writes the same formula on its own (reference.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "api/problem.h"

namespace flashcore::cpu {

struct ScoreMod {
  float scale;
  float softcap;  // 0: off
  float slope;    // 0: no ALiBi
  std::int64_t diagonal_shift;  // seqlen_k - seqlen_q

  ScoreMod(const detail::AttentionProblem& p, std::int64_t b, std::int64_t h)
      : scale(p.softmax_scale),
        softcap(p.softcap),
        slope(p.alibi_slopes == nullptr ? 0.0f : p.alibi_slopes[b * p.alibi_batch_stride + h]),
        diagonal_shift(p.seqlen_k - p.seqlen_q) {}

  // The score of raw product qk at (row, col), and through `dscore` its derivative with respect to
  // scale * qk (1 - tanh² with softcap, else 1).
  float operator()(float qk, std::int64_t row, std::int64_t col, float* dscore) const {
    float s = scale * qk;
    *dscore = 1.0f;
    if (softcap > 0.0f) {
      const float t = std::tanh(s / softcap);
      s = softcap * t;
      *dscore = 1.0f - t * t;
    }
    if (slope != 0.0f) s -= slope * static_cast<float>(std::llabs(row + diagonal_shift - col));
    return s;
  }
};

}  // namespace flashcore::cpu
