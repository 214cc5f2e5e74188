// The CPU flash backend gives bit-identical results whatever the thread count: each output row is
// owned by one task and summed in a fixed order (see flash_backward.cpp), so `deterministic`
// holds without extra work, and more threads than tasks is harmless.
#include <vector>

#include <gtest/gtest.h>

#include "common/attention_tensors.h"
#include "flashcore/attention.h"

namespace flashcore::testing {
namespace {

struct Results {
  std::vector<double> out, lse, dq, dk, dv;
};

Results run_with_threads(int num_threads) {
  AttentionTensors t({2, 150, 190, 4, 2, 64, true}, DType::kFloat16, Layout::kContiguous, 11);
  ForwardParams fwd = t.forward_params(Backend::kCpu);
  fwd.num_threads = num_threads;
  Status status = forward(fwd);
  EXPECT_TRUE(status.ok()) << status.message();
  BackwardParams bwd = t.backward_params(Backend::kCpu);
  bwd.num_threads = num_threads;
  status = backward(bwd);
  EXPECT_TRUE(status.ok()) << status.message();
  return {t.out.values(), t.lse.values(), t.dq.values(), t.dk.values(), t.dv.values()};
}

// Compares bit patterns through ==, which a NaN fails, so poisoned leftovers cannot match.
TEST(Threading, ResultsDoNotDependOnTheThreadCount) {
  const Results one = run_with_threads(1);
  for (const int threads : {2, 3, 0, 1000}) {
    const Results many = run_with_threads(threads);
    EXPECT_EQ(many.out, one.out) << threads << " threads";
    EXPECT_EQ(many.lse, one.lse) << threads << " threads";
    EXPECT_EQ(many.dq, one.dq) << threads << " threads";
    EXPECT_EQ(many.dk, one.dk) << threads << " threads";
    EXPECT_EQ(many.dv, one.dv) << threads << " threads";
  }
}

}  // namespace
}  // namespace flashcore::testing
