// The one FLOP count behind every TFLOP/s the CLI prints (the project's convention, which is
// FlashAttention's benchmark's): forward 4 * B * Hq * Sq * Sk * D (two matmuls of 2 FLOPs per
// multiply-add), halved when causal; backward 2.5x the forward (five matmuls to the forward's
// two); a forward + backward pass the sum. With causal and seqlen_q != seqlen_k the halving is
// kept rather than counting the exact visible pairs, so numbers compare with FlashAttention's.
#pragma once

#include "host_data.h"

namespace flashcore::cli {

enum class Pass { kForward, kBackward, kForwardBackward };

inline double flops(const Shape& s, Pass pass) {
  const double forward = 4.0 * static_cast<double>(s.batch) * static_cast<double>(s.heads_q) *
                         static_cast<double>(s.seqlen_q) * static_cast<double>(s.seqlen_k) *
                         static_cast<double>(s.head_dim) * (s.causal ? 0.5 : 1.0);
  switch (pass) {
    case Pass::kForward: return forward;
    case Pass::kBackward: return 2.5 * forward;
    case Pass::kForwardBackward: return 3.5 * forward;
  }
  return forward;
}

}  // namespace flashcore::cli
