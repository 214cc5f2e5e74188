// One fuzz problem, run and judged: flashcore's forward (and backward) through the public API on
// the chosen device, against the float64 reference under FlashAttention's rule (flashcore/accuracy.h:
// error at most 2x, 3x for gradients, that of a plain same-precision implementation, plus 2 ulp).
//
// Every output buffer, padding included, is NaN before the call, so an element left unwritten
// fails; input padding is NaN too, so a read outside a view poisons the result; and output padding
// must still be NaN afterwards, so a write outside a view fails.
#pragma once

#include <string>

#include "flashcore/attention.h"
#include "fuzz_memory.h"
#include "fuzz_problem.h"

namespace flashcore::cli {

enum class Verdict {
  kPassed,
  kFailed,
  kSkipped,  // the library answered kNotSupported: a valid call this device or build cannot serve
};

struct ProblemResult {
  Verdict verdict = Verdict::kPassed;
  std::string message;  // why it failed or was skipped ("" when it passed)
  // The CUDA runtime reported an error: the device may be unusable for every later call (a
  // faulting kernel leaves the context broken), so reruns, and the problems after this one, prove
  // nothing until the process restarts.
  bool device_error = false;
};

struct FuzzTarget {
  FuzzMemory* memory = nullptr;
  KernelFamily kernels = KernelFamily::kAuto;
  int threads = 0;  // CPU backend and reference: 0 uses every hardware thread
};

ProblemResult check_problem(const FuzzProblem& problem, const FuzzTarget& target);

}  // namespace flashcore::cli
