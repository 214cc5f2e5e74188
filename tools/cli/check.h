// --check: compares a run's outputs with the float64 reference (flashcore/reference.h) computed on
// the same rounded inputs.
//
// The bound is FIXED, not the tests' rule (tests/ compare with a plain same-precision
// implementation's error): an output passes when
//   max |out - ref| <= factor * eps(dtype) * max |ref|
// with eps the dtype's machine epsilon (fp16 2^-10, bf16 2^-7; a float32 output uses 2^-13, as the
// ladder's float32 rungs accumulate long float32 sums) and factor 4 for the forward output, 8 for
// the gradients. The LSE (float32 everywhere) passes within 2^-13 * max(1, max |ref|). A NaN, an
// infinity where the reference has none, or a -inf LSE row the reference does not have, fails.
#pragma once

#include <string>
#include <vector>

#include "host_data.h"

namespace flashcore::cli {

struct TensorCheck {
  std::string name;         // out, lse, dq, dk, dv
  double max_abs_error = 0;  // +inf when a value is non-finite where the reference's is not
  double rel_error = 0;      // ||x - ref|| / ||ref|| over the entries both have finite
  double max_abs_ref = 0;
  double bound = 0;
  long long nonfinite = 0;   // entries that are NaN, or infinite unlike the reference
  bool passed = false;
};

struct CheckResult {
  std::vector<TensorCheck> tensors;
  bool passed = false;
  std::string rule;  // one line describing the bound, for the report
};

// The float64 reference's outputs for these inputs (gradients too when inputs.dout is present).
Status reference_outputs(const Shape& shape, const HostInputs& inputs, int threads, HostOutputs* outputs);

// element: the dtype the implementation wrote out and the gradients in.
CheckResult check_outputs(const HostOutputs& got, const HostOutputs& ref, DType element);

}  // namespace flashcore::cli
