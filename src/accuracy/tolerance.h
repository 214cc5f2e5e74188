// FlashAttention's correctness rule (DEVELOPERS.md): against the float64 reference, a result's max
// error may be at most `factor` (2 for the forward, 3 for gradients) times the max error of the
// plain same-precision implementation (baseline.h), plus a noise floor of 2 ulp of the output dtype
// at the output's magnitude (the largest |reference| value).
//
// Non-finite values: where the reference is not finite (the -inf LSE of a row that sees no key, or
// the NaN and infinities non-finite inputs lead to, attention.h) the result must be the same: NaN
// where the reference is NaN, the same infinity where it is infinite. Anywhere else a NaN or an
// infinity fails, so NaN never passes where the reference is finite.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashcore/tensor.h"

namespace flashcore::accuracy {

struct Comparison {
  bool ok = false;
  double max_error = 0.0;       // max |got - reference| over finite reference values
  double baseline_error = 0.0;  // max |baseline - reference|
  double noise_floor = 0.0;     // 2 ulp of dtype at `magnitude`
  double allowed = 0.0;         // factor * baseline_error + noise_floor
  double magnitude = 0.0;       // max |reference|
  std::int64_t worst_index = -1;
  std::string message;  // one line: what was compared and, on failure, where and why
};

// The spacing of `dtype` numbers at |value| (fp16 and bf16 subnormals included).
double ulp_at(DType dtype, double value);

// `name` labels the message. All three vectors are in the same element order.
Comparison compare_to_reference(const std::string& name, DType dtype, double factor, const std::vector<double>& got,
                                const std::vector<double>& baseline, const std::vector<double>& reference);

}  // namespace flashcore::accuracy
