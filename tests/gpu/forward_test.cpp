// The CUDA forward kernel against the float64 reference under FlashAttention's tolerance rule, on
// every instantiated head dim, fp16 and bf16, causal and not, ragged sizes (1, 17, 1000, 4097),
// seqlen_q != seqlen_k both ways, GQA 8:1, MQA and non-contiguous layouts. Outputs are
// NaN-poisoned on the device before every run.
#include <cuda_runtime.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "api/problem.h"
#include "common/attention_tensors.h"
#include "common/reference_problem.h"
#include "flashcore/accuracy.h"
#include "cpu/reference.h"
#include "device_tensors.h"
#include "flashcore/attention.h"

namespace flashcore::testing {
namespace {

using namespace flashcore::accuracy;  // the accuracy rule and baseline, shared with `flashcore fuzz`

struct GpuCase {
  const char* name;
  AttentionShape shape;  // batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal
  Layout layout;
};

const std::vector<GpuCase>& gpu_forward_cases() {
  static const std::vector<GpuCase> cases = {
      {"seqlen1", {2, 1, 1, 4, 4, 64, false}, Layout::kContiguous},
      {"seqlen17_causal_gqa8", {2, 17, 17, 8, 1, 64, true}, Layout::kPaddedAligned},
      {"seqlen1000_d128", {1, 1000, 1000, 2, 2, 128, false}, Layout::kContiguous},
      {"seqlen1000_causal_d128_packed", {1, 1000, 1000, 2, 2, 128, true}, Layout::kPackedQkv},
      {"seqlen4097_d64", {1, 4097, 4097, 1, 1, 64, false}, Layout::kContiguous},
      {"seqlen4097_causal_d128", {1, 4097, 4097, 1, 1, 128, true}, Layout::kContiguous},
      {"q_shorter_causal_d96", {1, 17, 1000, 4, 2, 96, true}, Layout::kPaddedAligned},
      {"q_longer_causal_empty_rows_d32", {1, 1000, 17, 2, 2, 32, true}, Layout::kContiguous},
      {"q_longer_mqa_d192", {2, 300, 45, 2, 1, 192, false}, Layout::kPaddedAligned},
      {"d40_causal_mqa", {1, 127, 200, 3, 1, 40, true}, Layout::kContiguous},
      {"d256_padded", {1, 130, 257, 2, 2, 256, false}, Layout::kPaddedAligned},
      {"d256_causal", {1, 333, 333, 2, 1, 256, true}, Layout::kContiguous},
      // d256 causal with fewer queries than keys (bottom-right aligned), GQA, ragged key blocks
      {"d256_causal_q_shorter_gqa", {1, 700, 1500, 4, 2, 256, true}, Layout::kPaddedAligned},
      {"gqa8_causal_d128", {1, 333, 333, 16, 2, 128, true}, Layout::kPaddedAligned},
      {"d32_packed", {2, 77, 77, 3, 3, 32, false}, Layout::kPackedQkv},
  };
  return cases;
}

using GpuParam = std::tuple<GpuCase, DType>;

std::string param_name(const ::testing::TestParamInfo<GpuParam>& info) {
  return std::string(std::get<0>(info.param).name) + (std::get<1>(info.param) == DType::kFloat16 ? "_fp16" : "_bf16");
}

std::uint64_t seed_of(const GpuParam& p) {
  std::uint64_t h = 0x9e3779b97f4a7c15ull;
  for (const char* c = std::get<0>(p).name; *c; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
  return h + static_cast<std::uint64_t>(std::get<1>(p));
}

// Runs the CUDA forward on `t` (poisoning its device outputs first) and checks out and lse. A case
// this run has no kernel for (run_lacks_kernel) is noted and, when `skipped` is given, reported
// there; otherwise it is a failure.
void check_cuda_forward(AttentionTensors& t, cudaStream_t stream, bool* skipped = nullptr) {
  DeviceAttentionTensors dev(t);
  dev.poison_outputs();
  ForwardParams params = dev.forward_params();
  params.stream = stream;
  const Status status = forward(params);
  if (skipped != nullptr) *skipped = false;
  if (skipped != nullptr && run_lacks_kernel(status, shape_name(t.shape))) {
    *skipped = true;
    return;
  }
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  t.poison_forward_outputs();
  dev.download_forward_outputs(t);

  const ForwardParams host_params = t.forward_params(Backend::kCpuReference);
  detail::AttentionProblem problem;
  ASSERT_TRUE(detail::validate_forward(host_params, &problem).ok());
  std::vector<double> ref_out, ref_lse;
  ASSERT_TRUE(cpu::reference_forward_f64(host_params, problem, &ref_out, &ref_lse).ok());
  const BaselineForward base = baseline_forward(reference_problem(problem), problem.dtype,
                                                t.q.values(), t.k.values(), t.v.values());
  const Comparison out = compare_to_reference("out", t.dtype, 2.0, t.out.values(), base.out, ref_out);
  EXPECT_TRUE(out.ok) << out.message;
  const Comparison lse = compare_to_reference("lse", DType::kFloat32, 2.0, t.lse.values(), base.lse, ref_lse);
  EXPECT_TRUE(lse.ok) << lse.message;
}

class CudaForward : public ::testing::TestWithParam<GpuParam> {};

TEST_P(CudaForward, MatchesReferenceWithinTwiceTheSamePrecisionError) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const auto& [c, dtype] = GetParam();
  AttentionTensors t(c.shape, dtype, c.layout, seed_of(GetParam()));
  bool skipped = false;
  check_cuda_forward(t, nullptr, &skipped);
  if (skipped) GTEST_SKIP() << "no kernel for this dtype and head dim in this run (see the note above)";
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaForward,
                         ::testing::Combine(::testing::ValuesIn(gpu_forward_cases()),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16)),
                         param_name);

// The kernel runs on the stream it is given: work queued before it on that stream is seen.
TEST(CudaForwardStream, RunsOnTheGivenStream) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  AttentionTensors t({2, 300, 300, 4, 2, 64, true}, DType::kBFloat16, Layout::kContiguous, 7);
  check_cuda_forward(t, stream);
  cudaStreamDestroy(stream);
}

// A small grid for compute-sanitizer (memcheck, racecheck): ragged tiles, causal, GQA, padding.
TEST(CudaForwardSanitize, SmallGrid) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const AttentionShape shapes[] = {{1, 77, 130, 4, 2, 64, true}, {1, 130, 77, 2, 1, 128, true},
                                   {1, 65, 65, 2, 2, 256, false}, {2, 17, 17, 2, 2, 40, false}};
  for (const AttentionShape& s : shapes) {
    for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      AttentionTensors t(s, dtype, Layout::kPaddedAligned, 11);
      bool skipped = false;
      check_cuda_forward(t, nullptr, &skipped);
    }
  }
}

// What the kernels cannot read in place runs on staged copies (src/cuda/staging.h): head dims
// that are not a multiple of 8, and rows that are not 16-byte aligned (strides padded by 3).
TEST(CudaForwardStaged, HeadDimsNotAMultipleOf8AndUnalignedRows) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const AttentionShape shapes[] = {{1, 16, 16, 2, 2, 36, false}, {2, 77, 130, 4, 2, 1, true},
                                   {1, 130, 77, 2, 1, 100, true}, {1, 65, 65, 2, 2, 250, false}};
  for (const AttentionShape& s : shapes) {
    for (Layout layout : {Layout::kContiguous, Layout::kPadded}) {
      AttentionTensors t(s, DType::kBFloat16, layout, 13);
      bool skipped = false;
      check_cuda_forward(t, nullptr, &skipped);
    }
  }
  AttentionTensors aligned_d64_padded({1, 300, 300, 2, 2, 64, true}, DType::kFloat16, Layout::kPadded, 14);
  bool skipped = false;
  check_cuda_forward(aligned_d64_padded, nullptr, &skipped);
}

TEST(CudaForwardErrors, RejectsPointersThatAreNotDeviceMemory) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  // A host pointer tagged as CUDA memory is refused before any kernel touches it.
  AttentionTensors h({1, 16, 16, 2, 2, 64, false}, DType::kFloat16, Layout::kContiguous, 5);
  DeviceAttentionTensors dev64(h);
  ForwardParams params = dev64.forward_params();
  params.q.data = h.q.view().data;
  const Status status = forward(params);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("q"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace flashcore::testing
