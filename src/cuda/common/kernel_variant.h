// Which option code a call needs, as one compile-time parameter of the kernels with three values,
// so that each call runs the leanest kernel that serves it (measured on the H100 in
// docs/tuning/forward.md v9: a window-only call run by the score-option kernel paid its ~12%
// fixed cost at d = 128, while the window alone, as runtime data, costs the forward nothing).
//   kPlain     no window, no score options: most calls
//   kWindow    the sliding window (runtime data of the mask's trip counts and compares)
//   kScoreMod  softcap, ALiBi and dropout (runtime data: uniform branches per tile), with the window
// A family may serve a variant with leaner kernels of its own (the sm90 forward's one-option kernels,
// sm90/fwd_score_options.h's FwdVariant); this enum stays the call's needs.
#pragma once

#include "cuda/params.h"

namespace flashcore::cuda {

enum class KernelVariant { kPlain, kWindow, kScoreMod };

constexpr bool has_window(KernelVariant v) { return v != KernelVariant::kPlain; }
// Scores in score units and the ALiBi slope (score_mod.h).
constexpr bool has_score_mod(KernelVariant v) { return v == KernelVariant::kScoreMod; }

// The variant a call needs.
inline KernelVariant kernel_variant(const ProblemParams& p) {
  return p.has_score_mod ? KernelVariant::kScoreMod : p.has_options ? KernelVariant::kWindow : KernelVariant::kPlain;
}

}  // namespace flashcore::cuda
