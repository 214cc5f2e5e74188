// The CUDA backward pass against the float64 reference under FlashAttention's tolerance rule for
// gradients (3x the same-precision baseline's error plus 2 ulp): every instantiated head dim plus
// one that is not (40), fp16 and bf16, causal and not, ragged sizes (1, 17, 1000, 4097),
// seqlen_q != seqlen_k both ways (with query rows that see no key), GQA 8:1, MQA, strided and
// packed layouts. The forward's out and lse come from the float64 reference (rounded to their
// dtypes), so these tests do not depend on the forward kernel. dq, dk and dv are NaN-poisoned on
// the device before every run. The deterministic option is checked bit-exact over repeated runs.
// With FLASHCORE_KERNELS forcing a family (scripts/device.sh reruns the suite once per family),
// the head dims that family has no backward kernel for are skipped, each with a note; so are the
// head dims and dtypes a trimmed build (FLASHCORE_HEAD_DIMS / FLASHCORE_DTYPES) lacks.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "api/problem.h"
#include "common/reference_check.h"
#include "common/attention_tensors.h"
#include "common/reference_problem.h"
#include "flashcore/accuracy.h"
#include "cpu/reference.h"
#include "device_tensors.h"
#include "flashcore/attention.h"

namespace flashcore::testing {
namespace {

using namespace flashcore::accuracy;  // the accuracy rule and baseline, shared with `flashcore fuzz`

struct BwdCase {
  const char* name;
  AttentionShape shape;  // batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal
  Layout layout;
};

const std::vector<BwdCase>& backward_cases() {
  static const std::vector<BwdCase> cases = {
      {"seqlen_q1", {2, 1, 17, 4, 4, 64, false}, Layout::kContiguous},
      {"seqlen_q1_causal_d128", {1, 1, 300, 2, 1, 128, true}, Layout::kPaddedAligned},
      {"seqlen17_causal_gqa8", {2, 17, 17, 8, 1, 64, true}, Layout::kPaddedAligned},
      {"seqlen1000_d128", {1, 1000, 1000, 2, 2, 128, false}, Layout::kContiguous},
      {"seqlen1000_causal_d128_packed", {1, 1000, 1000, 2, 2, 128, true}, Layout::kPackedQkv},
      {"seqlen4097_causal_d64", {1, 4097, 4097, 1, 1, 64, true}, Layout::kContiguous},
      {"q_shorter_causal_d96", {1, 17, 1000, 4, 2, 96, true}, Layout::kPaddedAligned},
      {"q_longer_causal_empty_rows_d32", {1, 1000, 17, 2, 2, 32, true}, Layout::kContiguous},
      {"q_longer_d64", {1, 1000, 300, 2, 2, 64, false}, Layout::kPaddedAligned},
      {"q_longer_mqa_d192", {2, 300, 45, 2, 1, 192, false}, Layout::kPaddedAligned},
      {"d40_causal_mqa", {1, 127, 200, 3, 1, 40, true}, Layout::kContiguous},
      {"d256_strided", {1, 130, 257, 2, 2, 256, false}, Layout::kPaddedAligned},
      {"d256_causal", {1, 333, 333, 2, 1, 256, true}, Layout::kContiguous},
      {"gqa8_causal_d128", {1, 333, 333, 16, 2, 128, true}, Layout::kPaddedAligned},
      {"d32_packed", {2, 77, 77, 3, 3, 32, false}, Layout::kPackedQkv},
  };
  return cases;
}

// out and lse of the float64 reference forward, rounded to their dtypes, into `t`.
void fill_forward_outputs(AttentionTensors& t) {
  const ForwardParams params = t.forward_params(Backend::kCpuReference);
  detail::AttentionProblem problem;
  ASSERT_TRUE(detail::validate_forward(params, &problem).ok());
  std::vector<double> out, lse;
  ASSERT_TRUE(cpu::reference_forward_f64(params, problem, &out, &lse).ok());
  for (std::int64_t i = 0; i < t.out.numel(); ++i) t.out.set(i, out[i]);
  for (std::int64_t i = 0; i < t.lse.numel(); ++i) t.lse.set(i, lse[i]);
}

// Device copies of `t` with out and lse uploaded too (they are the backward's inputs).
struct BackwardRun {
  explicit BackwardRun(const AttentionTensors& t) : dev(t) {
    dev.out.upload(t.out);
    dev.lse.upload(t.lse);
  }

  // Poisons dq, dk, dv, runs the CUDA backward and downloads them into `t`.
  Status run(AttentionTensors& t, bool deterministic, cudaStream_t stream = nullptr, void* workspace = nullptr,
             std::size_t workspace_bytes = 0) {
    for (DeviceMirror* m : {&dev.dq, &dev.dk, &dev.dv}) m->poison();
    BackwardParams params = dev.backward_params();
    params.deterministic = deterministic;
    params.stream = stream;
    params.workspace = workspace;
    params.workspace_bytes = workspace_bytes;
    const Status status = backward(params);
    if (!status.ok()) return status;
    if (cudaStreamSynchronize(stream) != cudaSuccess || cudaGetLastError() != cudaSuccess) {
      return Status::CudaError("the backward kernels failed");
    }
    t.poison_backward_outputs();
    dev.download_backward_outputs(t);
    return Status::Ok();
  }

  DeviceAttentionTensors dev;
};

// dq, dk, dv in `t` against the float64 reference backward, with the same-precision baseline's
// error as the yardstick.
void expect_gradients_match_reference(const AttentionTensors& t) {
  const BackwardParams params = t.backward_params(Backend::kCpuReference);
  detail::AttentionProblem problem;
  ASSERT_TRUE(detail::validate_backward(params, &problem).ok());
  std::vector<double> ref_dq, ref_dk, ref_dv;
  ASSERT_TRUE(cpu::reference_backward_f64(params, problem, &ref_dq, &ref_dk, &ref_dv).ok());
  const BaselineBackward base =
      baseline_backward(reference_problem(problem), problem.dtype,
                        t.q.values(), t.k.values(), t.v.values(), t.dout.values());
  for (const auto& [name, got, baseline, reference] :
       {std::tuple{"dq", &t.dq, &base.dq, &ref_dq}, {"dk", &t.dk, &base.dk, &ref_dk}, {"dv", &t.dv, &base.dv, &ref_dv}}) {
    const Comparison c = compare_to_reference(name, t.dtype, 3.0, got->values(), *baseline, *reference);
    EXPECT_TRUE(c.ok) << shape_name(t.shape) << ": " << c.message;
  }
}

using BwdParam = std::tuple<BwdCase, DType>;

std::string param_name(const ::testing::TestParamInfo<BwdParam>& info) {
  return std::string(std::get<0>(info.param).name) + (std::get<1>(info.param) == DType::kFloat16 ? "_fp16" : "_bf16");
}

std::uint64_t seed_of(const BwdParam& p) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char* c = std::get<0>(p).name; *c; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
  return h + static_cast<std::uint64_t>(std::get<1>(p));
}

class CudaBackward : public ::testing::TestWithParam<BwdParam> {};

TEST_P(CudaBackward, MatchesReferenceWithinThreeTimesTheSamePrecisionError) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const auto& [c, dtype] = GetParam();
  AttentionTensors t(c.shape, dtype, c.layout, seed_of(GetParam()));
  fill_forward_outputs(t);
  BackwardRun run(t);
  const Status status = run.run(t, /*deterministic=*/false);
  if (run_lacks_kernel(status, shape_name(c.shape))) GTEST_SKIP() << status.message();
  ASSERT_TRUE(status.ok()) << status.message();
  expect_gradients_match_reference(t);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaBackward,
                         ::testing::Combine(::testing::ValuesIn(backward_cases()),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16)),
                         param_name);

// Seqlen 1 (each query sees a single key): softmax is constant, so the exact dq and dk are 0, and
// so is the same-precision baseline's error; what FlashAttention's dS = dP - D leaves there is
// accuracy.h's row-sum allowance, which the rule adds for dq and dk.
TEST(CudaBackwardSeqlen1, GradientsOfAConstantSoftmax) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const AttentionShape shapes[] = {{2, 1, 1, 4, 4, 64, false}, {1, 1, 1, 2, 2, 32, true}};
  for (const AttentionShape& s : shapes) {
    for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      AttentionTensors t(s, dtype, Layout::kContiguous, 13);
      fill_forward_outputs(t);
      BackwardRun run(t);
      const Status status = run.run(t, /*deterministic=*/false);
      ASSERT_TRUE(status.ok()) << status.message();

      for (const Comparison& c : compare_backward_to_reference(t, /*row_sum_allowance=*/true)) {
        EXPECT_TRUE(c.ok) << shape_name(s) << ": " << c.message;
      }
    }
  }
}

std::vector<unsigned char> bytes_of(const HostTensor& t) {
  std::vector<unsigned char> bytes(static_cast<size_t>(t.numel()) * sizeof(double));
  const std::vector<double> values = t.values();
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// Deterministic mode: ten runs give bit-identical dq, dk, dv at every head dim a family builds,
// and they are correct. seqlen_k > 16 key blocks of 128 with batch * heads_kv small makes the
// kernels loop over several key blocks per CTA (more blocks than dq_accum slices); GQA groups sum
// dK/dV over their query heads.
TEST(CudaBackwardDeterministic, BitIdenticalOverRepeatedRuns) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  constexpr int kRepeats = 10;
  const AttentionShape shapes[] = {{1, 1000, 1000, 8, 2, 64, true},  {1, 700, 2500, 2, 1, 128, false},
                                   {1, 500, 2200, 4, 2, 64, true},   {1, 300, 2100, 4, 2, 96, true},
                                   {1, 200, 2100, 2, 1, 192, false}, {1, 160, 2100, 2, 2, 256, true},
                                   {1, 100, 2100, 2, 1, 32, false}};
  for (const AttentionShape& s : shapes) {
    AttentionTensors t(s, DType::kBFloat16, Layout::kContiguous, 21);
    fill_forward_outputs(t);
    BackwardRun run(t);
    std::vector<unsigned char> first[3];
    bool served = true;
    for (int repeat = 0; repeat < kRepeats; ++repeat) {
      const Status status = run.run(t, /*deterministic=*/true);
      if (run_lacks_kernel(status, shape_name(s))) {
        served = false;
        break;
      }
      ASSERT_TRUE(status.ok()) << status.message();
      const std::vector<unsigned char> now[3] = {bytes_of(t.dq), bytes_of(t.dk), bytes_of(t.dv)};
      for (int g = 0; g < 3; ++g) {
        if (repeat == 0) {
          first[g] = now[g];
        } else {
          EXPECT_TRUE(now[g] == first[g]) << shape_name(s) << ": gradient " << "qkv"[g] << " changed in run "
                                          << repeat + 1;
        }
      }
    }
    if (served) expect_gradients_match_reference(t);
  }
}

// Grouped-query heads split over a cluster of CTAs (the sm90 family, default mode: each CTA sweeps
// a share of the group and dK/dV are summed through distributed shared memory in a fixed order):
// correct, and dK/dV bit-identical run after run (dQ's atomic adds are not ordered in the default
// mode, so dq is not compared). Groups of 8, 4 and 2 (splits 4, 4, 2), causal and not, ragged;
// at d256 (the transposed kernel's split, bwd_swapkv_cluster_reduce.h) 8:1 causal (split 2) and
// 4:1 non-causal on a grid of under a wave (split 4).
TEST(CudaBackwardGqaSplit, KvGradientsBitIdenticalAndCorrect) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  constexpr int kRepeats = 5;
  const AttentionShape shapes[] = {{2, 700, 700, 16, 2, 128, true}, {1, 333, 520, 8, 2, 64, false},
                                   {1, 257, 257, 4, 2, 96, true},   {2, 1000, 1000, 8, 1, 64, true},
                                   {1, 300, 400, 8, 1, 256, true},  {1, 200, 260, 4, 1, 256, false}};
  for (const AttentionShape& s : shapes) {
    for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
      AttentionTensors t(s, dtype, Layout::kContiguous, 23);
      fill_forward_outputs(t);
      BackwardRun run(t);
      std::vector<unsigned char> first[2];
      bool served = true;
      for (int repeat = 0; repeat < kRepeats; ++repeat) {
        const Status status = run.run(t, /*deterministic=*/false);
        if (run_lacks_kernel(status, shape_name(s))) {
          served = false;
          break;
        }
        ASSERT_TRUE(status.ok()) << status.message();
        const std::vector<unsigned char> now[2] = {bytes_of(t.dk), bytes_of(t.dv)};
        for (int g = 0; g < 2; ++g) {
          if (repeat == 0) {
            first[g] = now[g];
          } else {
            EXPECT_TRUE(now[g] == first[g]) << shape_name(s) << ": gradient " << "kv"[g] << " changed in run "
                                            << repeat + 1;
          }
        }
      }
      if (served) expect_gradients_match_reference(t);
    }
  }
}

// A caller-provided workspace of backward_workspace_size() bytes gives the same (deterministic)
// gradients as the library's own allocation; a smaller one is refused, naming the argument.
TEST(CudaBackwardWorkspace, CallerWorkspaceMatchesOwnAllocation) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  AttentionTensors t({2, 200, 300, 4, 2, 64, true}, DType::kFloat16, Layout::kContiguous, 5);
  fill_forward_outputs(t);
  BackwardRun run(t);
  ASSERT_TRUE(run.run(t, /*deterministic=*/true).ok());
  const std::vector<unsigned char> own[3] = {bytes_of(t.dq), bytes_of(t.dk), bytes_of(t.dv)};

  BackwardParams params = run.dev.backward_params();
  params.causal = true;
  params.deterministic = true;
  std::size_t bytes = 0;
  ASSERT_TRUE(backward_workspace_size(params, &bytes).ok());
  ASSERT_GT(bytes, 0u);
  void* workspace = nullptr;
  ASSERT_EQ(cudaMalloc(&workspace, bytes), cudaSuccess);
  const Status status = run.run(t, /*deterministic=*/true, nullptr, workspace, bytes);
  EXPECT_TRUE(status.ok()) << status.message();
  const std::vector<unsigned char> given[3] = {bytes_of(t.dq), bytes_of(t.dk), bytes_of(t.dv)};
  for (int g = 0; g < 3; ++g) EXPECT_TRUE(given[g] == own[g]) << "gradient " << "qkv"[g];

  const Status small = run.run(t, /*deterministic=*/true, nullptr, workspace, bytes - 1);
  EXPECT_EQ(small.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(small.message().find("workspace"), std::string::npos) << small.message();
  cudaFree(workspace);
}

// The kernels run on the stream they are given.
TEST(CudaBackwardStream, RunsOnTheGivenStream) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  AttentionTensors t({2, 300, 300, 4, 2, 64, true}, DType::kBFloat16, Layout::kContiguous, 7);
  fill_forward_outputs(t);
  BackwardRun run(t);
  const Status status = run.run(t, /*deterministic=*/false, stream);
  ASSERT_TRUE(status.ok()) << status.message();
  expect_gradients_match_reference(t);
  cudaStreamDestroy(stream);
}

// A small grid for compute-sanitizer (memcheck, racecheck): ragged tiles, causal, GQA, strides,
// single-buffered Q/dO (d=256), a head dim below the kernel's (40), both modes.
TEST(CudaBackwardSanitize, SmallGrid) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const AttentionShape shapes[] = {{1, 77, 130, 4, 2, 64, true},   {1, 130, 77, 2, 1, 128, true},
                                   {1, 65, 65, 2, 2, 256, false},  {2, 17, 17, 2, 2, 40, false},
                                   {1, 100, 300, 2, 1, 96, true}};
  for (const AttentionShape& s : shapes) {
    for (bool deterministic : {false, true}) {
      AttentionTensors t(s, DType::kFloat16, Layout::kPaddedAligned, 11);
      fill_forward_outputs(t);
      BackwardRun run(t);
      const Status status = run.run(t, deterministic);
      if (run_lacks_kernel(status, shape_name(s))) continue;
      ASSERT_TRUE(status.ok()) << status.message();
      expect_gradients_match_reference(t);
    }
  }
}

// What the kernels cannot read in place runs on staged copies (src/cuda/staging.h): head dims
// that are not a multiple of 8, and rows that are not 16-byte aligned (strides padded by 3); the
// caller's workspace, sized by backward_workspace_size, covers the staged problem.
TEST(CudaBackwardStaged, HeadDimsNotAMultipleOf8AndUnalignedRows) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const AttentionShape shapes[] = {{1, 16, 16, 2, 2, 36, false}, {2, 77, 130, 4, 2, 1, true},
                                   {1, 130, 77, 2, 1, 100, true}, {1, 70, 70, 2, 2, 64, true}};
  for (const AttentionShape& s : shapes) {
    for (Layout layout : {Layout::kContiguous, Layout::kPadded}) {
      AttentionTensors t(s, DType::kFloat16, layout, 15);
      fill_forward_outputs(t);
      BackwardRun run(t);
      std::size_t bytes = 0;
      ASSERT_TRUE(backward_workspace_size(run.dev.backward_params(), &bytes).ok());
      void* workspace = nullptr;
      ASSERT_EQ(cudaMalloc(&workspace, bytes), cudaSuccess);
      const Status status = run.run(t, /*deterministic=*/false, nullptr, workspace, bytes);
      cudaFree(workspace);
      if (run_lacks_kernel(status, shape_name(s))) continue;
      ASSERT_TRUE(status.ok()) << status.message();
      expect_gradients_match_reference(t);
    }
  }
}

TEST(CudaBackwardErrors, RejectsPointersThatAreNotDeviceMemory) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  // A host pointer tagged as CUDA memory is refused before any kernel touches it.
  AttentionTensors h({1, 16, 16, 2, 2, 64, false}, DType::kFloat16, Layout::kContiguous, 5);
  DeviceAttentionTensors dev64(h);
  BackwardParams params = dev64.backward_params();
  params.dk.data = h.dk.view().data;
  const Status status = backward(params);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("dk"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace flashcore::testing
