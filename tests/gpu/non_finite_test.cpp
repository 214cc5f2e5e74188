// NaN and infinities in q, k or v on the CUDA kernels: the cases of tests/common/non_finite_cases.h
// (the same ones the CPU backend passes), fp16 and bf16, on each kernel family the device runs.
#include <cuda_runtime.h>

#include <string>

#include <gtest/gtest.h>

#include "common/non_finite_cases.h"
#include "device_tensors.h"

namespace flashcore::testing {
namespace {

// The forward on `family`, then the backward on the same family where it has one (a family
// without a backward for this problem answers NotSupported, and the automatic choice runs it).
template <KernelFamily family>
void run_cuda(AttentionTensors& t) {
  DeviceAttentionTensors dev(t);
  dev.poison_outputs();
  ForwardParams fwd = dev.forward_params();
  fwd.kernels = family;
  const Status f = forward(fwd);
  ASSERT_TRUE(f.ok()) << f.message();
  BackwardParams bwd = dev.backward_params();
  bwd.kernels = family;
  Status b = backward(bwd);
  if (b.code() == StatusCode::kNotSupported) {
    bwd.kernels = KernelFamily::kAuto;
    b = backward(bwd);
  }
  ASSERT_TRUE(b.ok()) << b.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  t.poison_forward_outputs();
  t.poison_backward_outputs();
  dev.download_forward_outputs(t);
  dev.download_backward_outputs(t);
}

std::string sm90_unavailable() {
  if (std::string why = gpu_unavailable_reason(); !why.empty()) return why;
  int device = 0, major = 0, minor = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (major * 10 + minor != 90) return "the sm90 kernels need compute capability 9.0";
  return "";
}

INSTANTIATE_TEST_SUITE_P(
    Cuda, NonFinite,
    ::testing::Values(
        NonFiniteParam{"sm80", DType::kFloat16, run_cuda<KernelFamily::kSm80>, gpu_unavailable_reason, false},
        NonFiniteParam{"sm80", DType::kBFloat16, run_cuda<KernelFamily::kSm80>, gpu_unavailable_reason, false},
        NonFiniteParam{"sm90", DType::kFloat16, run_cuda<KernelFamily::kSm90>, sm90_unavailable, false},
        NonFiniteParam{"sm90", DType::kBFloat16, run_cuda<KernelFamily::kSm90>, sm90_unavailable, false}),
    [](const ::testing::TestParamInfo<NonFiniteParam>& param) {
      return std::string(param.param.name) + (param.param.dtype == DType::kFloat16 ? "_fp16" : "_bf16");
    });

// What does hold on the GPU when a non-finite value sits in a tile that other rows see masked
// (the cases skipped above): it reaches every row that sees it, in its own column only, and never
// rows whose tiles do not reach its key. Causal 400 x 400, v[300][9] = NaN, then k[300][3] = NaN:
// no family's query tile (<= 192 rows) holding rows < 44 runs key blocks (<= 128 keys) past 255.
class NonFiniteInMaskedTiles : public ::testing::TestWithParam<NonFiniteParam> {};

TEST_P(NonFiniteInMaskedTiles, ReachesTheRowsThatSeeItAndStaysNearItsTile) {
  if (const std::string why = GetParam().unavailable(); !why.empty()) GTEST_SKIP() << why;
  {
    AttentionTensors t(shape_of(400, 400, 1, 1, 32, true), GetParam().dtype, Layout::kContiguous, 31);
    t.v.set(at(t.v, 0, 300, 0, 9), kNaN);
    GetParam().run(t);
    for (std::int64_t i = 0; i < 400; ++i) {
      for (std::int64_t d = 0; d < 32; ++d) {
        const bool nan = std::isnan(t.out.get(at(t.out, 0, i, 0, d)));
        if (d != 9 || i < 44) {
          EXPECT_FALSE(nan) << "out row " << i << " column " << d;
        } else if (i >= 300) {
          EXPECT_TRUE(nan) << "out row " << i;
        }
      }
      EXPECT_TRUE(std::isfinite(t.lse.get(i))) << "lse row " << i;
    }
  }
  {
    AttentionTensors t(shape_of(400, 400, 1, 1, 32, true), GetParam().dtype, Layout::kContiguous, 32);
    t.k.set(at(t.k, 0, 300, 0, 3), kNaN);
    GetParam().run(t);
    for (std::int64_t i = 0; i < 400; ++i) {
      EXPECT_EQ(row_is(t.out, i, 0, is_nan), i >= 300) << "out row " << i;
      EXPECT_EQ(std::isnan(t.lse.get(i)), i >= 300) << "lse row " << i;
      if (i < 44) {
        EXPECT_TRUE(row_is(t.dq, i, 0, is_finite)) << "dq row " << i;
      }
      if (i >= 300) {
        EXPECT_TRUE(row_is(t.dq, i, 0, is_nan)) << "dq row " << i;
      }
    }
    for (std::int64_t j = 0; j < 400; ++j) {
      // Every key is seen by some row >= 300, whose P and dS are NaN.
      EXPECT_TRUE(row_is(t.dk, j, 0, is_nan)) << "dk row " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cuda, NonFiniteInMaskedTiles,
    ::testing::Values(
        NonFiniteParam{"sm80", DType::kFloat16, run_cuda<KernelFamily::kSm80>, gpu_unavailable_reason, false},
        NonFiniteParam{"sm80", DType::kBFloat16, run_cuda<KernelFamily::kSm80>, gpu_unavailable_reason, false},
        NonFiniteParam{"sm90", DType::kFloat16, run_cuda<KernelFamily::kSm90>, sm90_unavailable, false},
        NonFiniteParam{"sm90", DType::kBFloat16, run_cuda<KernelFamily::kSm90>, sm90_unavailable, false}),
    [](const ::testing::TestParamInfo<NonFiniteParam>& param) {
      return std::string(param.param.name) + (param.param.dtype == DType::kFloat16 ? "_fp16" : "_bf16");
    });

}  // namespace
}  // namespace flashcore::testing
