// The accuracy rule of flashcore/accuracy.h.
#include "flashcore/accuracy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace flashcore::accuracy {
namespace {

struct Format {
  int mantissa_bits;  // explicit fraction bits
  int min_exponent;   // exponent of the smallest normal number
};

Format format_of(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return {10, -14};
    case DType::kBFloat16:
      return {7, -126};
    case DType::kFloat32:
    case DType::kInt32:  // no attention values are int32 (index tensors only)
      return {23, -126};
  }
  return {23, -126};
}

}  // namespace

double ulp_at(DType dtype, double value) {
  const Format f = format_of(dtype);
  const double magnitude = std::fabs(value);
  int exponent = f.min_exponent;  // subnormals share the smallest normal's spacing
  if (magnitude > 0.0 && std::isfinite(magnitude)) exponent = std::max(std::ilogb(magnitude), f.min_exponent);
  return std::ldexp(1.0, exponent - f.mantissa_bits);
}

Comparison compare_to_reference(const std::string& name, DType dtype, double factor, const std::vector<double>& got,
                                const std::vector<double>& baseline, const std::vector<double>& reference) {
  Comparison c;
  std::ostringstream msg;
  msg << name << ": ";
  if (got.size() != reference.size() || baseline.size() != reference.size()) {
    msg << "size mismatch: got " << got.size() << ", baseline " << baseline.size() << ", reference "
        << reference.size();
    c.message = msg.str();
    return c;
  }

  std::int64_t bad_index = -1;  // first element that fails outright (NaN, wrong infinity)
  for (size_t e = 0; e < reference.size(); ++e) {
    const double r = reference[e];
    if (!std::isfinite(r)) {  // NaN must meet NaN, an infinity the same infinity
      const bool same = std::isnan(r) ? std::isnan(got[e]) : got[e] == r;
      if (!same && bad_index < 0) bad_index = static_cast<std::int64_t>(e);
      continue;
    }
    if (!std::isfinite(got[e])) {
      if (bad_index < 0) bad_index = static_cast<std::int64_t>(e);
      continue;
    }
    c.magnitude = std::max(c.magnitude, std::fabs(r));
    const double err = std::fabs(got[e] - r);
    if (c.worst_index < 0 || err > c.max_error) {
      c.max_error = err;
      c.worst_index = static_cast<std::int64_t>(e);
    }
    // A non-finite baseline where the reference is finite makes its error infinite: the check
    // then admits anything, so it is reported as a failure of the test itself below.
    c.baseline_error = std::max(c.baseline_error, std::isfinite(baseline[e]) ? std::fabs(baseline[e] - r)
                                                                             : std::numeric_limits<double>::infinity());
  }
  c.noise_floor = 2.0 * ulp_at(dtype, c.magnitude);
  c.allowed = factor * c.baseline_error + c.noise_floor;

  msg << "max error " << c.max_error << " vs allowed " << c.allowed << " (" << factor << " x baseline "
      << c.baseline_error << " + 2 ulp " << c.noise_floor << " at magnitude " << c.magnitude << ")";
  if (bad_index >= 0) {
    msg << "; element " << bad_index << " is " << got[static_cast<size_t>(bad_index)] << " where the reference is "
        << reference[static_cast<size_t>(bad_index)];
  } else if (!std::isfinite(c.baseline_error)) {
    msg << "; the baseline is not finite where the reference is: the test's inputs are unusable";
  } else if (!(c.max_error <= c.allowed)) {
    const size_t w = static_cast<size_t>(c.worst_index);
    msg << "; worst element " << c.worst_index << ": got " << got[w] << ", reference " << reference[w] << ", baseline "
        << baseline[w];
  }
  c.ok = bad_index < 0 && std::isfinite(c.baseline_error) && c.max_error <= c.allowed;
  c.message = msg.str();
  return c;
}

double single_key_gradient_bound(const ReferenceProblem& p, DType dtype, const std::vector<double>& q,
                                 const std::vector<double>& k, const std::vector<double>& v,
                                 const std::vector<double>& dout, bool for_dq) {
  const std::int64_t d = p.head_dim;
  const std::int64_t group = p.heads_q / p.heads_kv;
  // max over query rows of sum_i |dO_i V_i|, V the row's one key: any key of its (batch, kv
  // head), which covers a window of (0, 0) as well as seqlen_k == 1.
  double max_dot = 0.0;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
      for (std::int64_t h = 0; h < p.heads_q; ++h) {
        const double* o = dout.data() + ((b * p.seqlen_q + i) * p.heads_q + h) * d;
        for (std::int64_t j = 0; j < p.seqlen_k; ++j) {
          const double* vr = v.data() + ((b * p.seqlen_k + j) * p.heads_kv + h / group) * d;
          double dot = 0.0;
          for (std::int64_t c = 0; c < d; ++c) dot += std::fabs(o[c] * vr[c]);
          max_dot = std::max(max_dot, dot);
        }
      }
    }
  }
  double max_other = 0.0;
  for (double x : for_dq ? k : q) max_other = std::max(max_other, std::fabs(x));
  double ds_bound = 2.0 * static_cast<double>(d) * std::ldexp(1.0, -24) * max_dot * (1.0 + std::ldexp(1.0, -7));
  if (p.dropout_p > 0.0) {
    // With dropout a kept row's O is Z v rounded to the dtype (Z = 1 / (1 - p)), no longer v itself:
    // D = dO · O then differs from Z dO · V by up to Z * sum |dO V| times the dtype's unit roundoff.
    const double unit = dtype == DType::kBFloat16 ? std::ldexp(1.0, -8)
                        : dtype == DType::kFloat16 ? std::ldexp(1.0, -11)
                                                    : std::ldexp(1.0, -24);
    ds_bound += (1.0 / (1.0 - p.dropout_p)) * max_dot * unit * (1.0 + std::ldexp(1.0, -7));
  }
  const double rows = for_dq ? 1.0 : static_cast<double>(p.seqlen_q * group);
  const double bound = std::fabs(p.softmax_scale) * ds_bound * max_other * rows;
  return bound + ulp_at(dtype, bound);
}

}  // namespace flashcore::accuracy
