// Summary statistics of timed passes.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace flashcore::cli {

// The q-quantile by nearest rank (q = 0.5: the median for odd counts, the lower middle for even).
// 0 for no samples.
inline double quantile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0.0;
  std::sort(samples.begin(), samples.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(samples.size())));
  return samples[std::min(samples.size() - 1, rank > 0 ? rank - 1 : 0)];
}

}  // namespace flashcore::cli
