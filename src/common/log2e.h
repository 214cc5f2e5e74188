// log2(e), for every backend that evaluates exp(x) as exp2(x * log2(e)): with the softmax scale
// pre-multiplied by it, each score costs one FMA and one exp2.
#pragma once

namespace flashcore {

inline constexpr double kLog2e = 1.4426950408889634;

}  // namespace flashcore
