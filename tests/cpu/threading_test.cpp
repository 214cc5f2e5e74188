// The CPU flash backend gives bit-identical results whatever the thread count: each output row is
// owned by one task and summed in a fixed order (see flash_backward.cpp), so `deterministic`
// holds without extra work, and more threads than tasks is harmless.
//
// The same holds on a borrowed OpenMP runtime's threads (flashcore/cpu_threads.h), which the Python
// binding uses under PyTorch.
#include <dlfcn.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/attention_tensors.h"
#include "flashcore/attention.h"
#include "flashcore/cpu_threads.h"

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

TEST(Threading, OpenMpThreadsGiveThePoolsResults) {
  // GCC's OpenMP runtime, loaded here as PyTorch's is loaded in a Python process.
  if (dlopen("libgomp.so.1", RTLD_NOW) == nullptr) GTEST_SKIP() << "libgomp.so.1 is not installed: " << dlerror();
  const Results pool = run_with_threads(3);
  const Status bound = use_openmp_threads("libgomp.so.1");
  ASSERT_TRUE(bound.ok()) << bound.message();
  const Results openmp = run_with_threads(3);
  const Results openmp_default = run_with_threads(0);
  EXPECT_TRUE(use_openmp_threads(nullptr).ok());  // back to the pool for the other tests
  EXPECT_EQ(openmp.out, pool.out);
  EXPECT_EQ(openmp.lse, pool.lse);
  EXPECT_EQ(openmp.dq, pool.dq);
  EXPECT_EQ(openmp.dk, pool.dk);
  EXPECT_EQ(openmp.dv, pool.dv);
  EXPECT_EQ(openmp_default.out, pool.out);
  EXPECT_EQ(openmp_default.dq, pool.dq);
}

TEST(Threading, UseOpenMpThreadsRejectsWhatIsNotALoadedOpenMpRuntime) {
  Status status = use_openmp_threads("/nonexistent/libgomp.so.1");
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("runtime_library"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("not a library loaded"), std::string::npos) << status.message();
  status = use_openmp_threads("libc.so.6");  // loaded, but no OpenMP entry points
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("not an OpenMP runtime"), std::string::npos) << status.message();
  EXPECT_TRUE(use_openmp_threads("").ok());
}

}  // namespace
}  // namespace flashcore::testing
