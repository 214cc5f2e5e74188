// Sliding window, softcap and ALiBi in the CUDA kernels (the sm80 family; on an H100 the sm90
// option kernels at d <= 128, forward and backward, kernels=auto falling back to sm80 for the
// rest), forward and backward, each option alone and
// combined with GQA, causal and seqlen_q != seqlen_k, against the float64 reference under
// FlashAttention's rule. Outputs are NaN-poisoned on the device before every run.
//
// Also here, needing no GPU: common/mask.h's trip counts against the visibility rule element by
// element, for the tile sizes the kernels use.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "api/problem.h"
#include "common/reference_check.h"
#include "common/attention_tensors.h"
#include "common/reference_problem.h"
#include "cpu/reference.h"
#include "cuda/common/mask.h"
#include "cuda/device.h"
#include "cuda/dispatch.h"
#include "device_tensors.h"
#include "flashcore/accuracy.h"
#include "flashcore/attention.h"

namespace flashcore::testing {
namespace {

using namespace flashcore::accuracy;

// ---- common/mask.h's trip counts (host code; runs without a GPU) ----

bool sees(int sq, int sk, bool causal, int left, int right, int i, int j) {
  const int offset = j - (i + sk - sq);
  if (causal && offset > 0) return false;
  if (right >= 0 && offset > right) return false;
  if (left >= 0 && offset < -left) return false;
  return j < sk;
}

struct MaskCase {
  int sq, sk;
  bool causal;
  int left, right;
};

std::vector<MaskCase> mask_cases() {
  std::vector<MaskCase> cases;
  for (const auto& [sq, sk] : {std::pair{200, 200}, std::pair{70, 333}, std::pair{333, 70}, std::pair{1, 129},
                               std::pair{129, 1}, std::pair{256, 256}}) {
    for (const bool causal : {false, true}) {
      for (const int left : {-1, 0, 1, 63, 64, 65, 150}) {
        for (const int right : {-1, 0, 5, 64, 100}) {
          cases.push_back({sq, sk, causal, left, causal ? -1 : right});
        }
      }
    }
  }
  return cases;
}

// Forward: the key blocks [n_block_begin, n_block_end) of each query block hold every key its
// rows see, and the blocks taken unmasked hold only visible pairs (for rows that exist).
TEST(MaskTripCounts, ForwardCoversTheWindowAndMasksWhatItMust) {
  for (const auto& [block_m, block_n] : {std::pair{128, 64}, std::pair{128, 128}, std::pair{64, 64}}) {
    for (const MaskCase& c : mask_cases()) {
      const cuda::AttentionMask mask{c.sq, c.sk, c.causal, c.left, c.right};
      const std::string where = "sq " + std::to_string(c.sq) + " sk " + std::to_string(c.sk) +
                                (c.causal ? " causal" : "") + " window (" + std::to_string(c.left) + ", " +
                                std::to_string(c.right) + ") blocks " + std::to_string(block_m) + "x" +
                                std::to_string(block_n);
      for (int m_block = 0; m_block * block_m < c.sq; ++m_block) {
        const int begin = mask.n_block_begin(m_block, block_m, block_n);
        const int end = mask.n_block_end(m_block, block_m, block_n);
        const int unmasked_end = mask.n_block_unmasked(m_block, block_m, block_n);
        const int unmasked_begin = mask.n_block_unmasked_begin(m_block, block_m, block_n);
        const int rows_end = std::min(c.sq, (m_block + 1) * block_m);
        for (int i = m_block * block_m; i < rows_end; ++i) {
          for (int j = 0; j < c.sk; ++j) {
            const int n = j / block_n;
            const bool visible = sees(c.sq, c.sk, c.causal, c.left, c.right, i, j);
            ASSERT_EQ(mask.visible(i, j), visible) << where << " (" << i << ", " << j << ")";
            if (visible) {
              ASSERT_TRUE(n >= begin && n < end) << where << ": block " << n << " skipped, row " << i;
            }
          }
        }
        for (int n = std::max(begin, unmasked_begin); n < std::min(end, unmasked_end); ++n) {
          for (int i = m_block * block_m; i < rows_end; ++i) {
            for (int j = n * block_n; j < (n + 1) * block_n; ++j) {
              ASSERT_TRUE(sees(c.sq, c.sk, c.causal, c.left, c.right, i, j))
                  << where << ": block " << n << " runs unmasked but (" << i << ", " << j << ") is hidden";
            }
          }
        }
      }
    }
  }
}

// Backward: the query blocks [m_block_min, m_block_max) of each key block hold every row that sees
// one of its keys, and a tile tile_needs_mask() passes holds only visible pairs.
TEST(MaskTripCounts, BackwardCoversTheWindowAndMasksWhatItMust) {
  for (const auto& [block_m, block_n] : {std::pair{64, 128}, std::pair{128, 128}, std::pair{64, 64}}) {
    for (const MaskCase& c : mask_cases()) {
      const cuda::AttentionMask mask{c.sq, c.sk, c.causal, c.left, c.right};
      const int m_blocks = (c.sq + block_m - 1) / block_m;
      for (int n0 = 0; n0 < c.sk; n0 += block_n) {
        const int first = mask.m_block_min(n0, block_m);
        const int last = mask.m_block_max(n0, block_n, block_m, m_blocks);
        for (int i = 0; i < c.sq; ++i) {
          for (int j = n0; j < std::min(c.sk, n0 + block_n); ++j) {
            if (!sees(c.sq, c.sk, c.causal, c.left, c.right, i, j)) continue;
            ASSERT_TRUE(i / block_m >= first && i / block_m < last)
                << "sq " << c.sq << " sk " << c.sk << " window (" << c.left << ", " << c.right << "): row " << i
                << " sees key " << j << " but its query block is skipped";
          }
        }
        for (int m = first; m < last; ++m) {
          if (mask.tile_needs_mask(m * block_m, n0, block_m, block_n)) continue;
          for (int i = m * block_m; i < std::min(c.sq, (m + 1) * block_m); ++i) {
            for (int j = n0; j < n0 + block_n; ++j) {
              ASSERT_TRUE(sees(c.sq, c.sk, c.causal, c.left, c.right, i, j))
                  << "tile (" << m * block_m << ", " << n0 << ") runs unmasked but (" << i << ", " << j
                  << ") is hidden";
            }
          }
        }
      }
    }
  }
}

// row_sees_a_key is "some key j is visible to row i", for every mask case and row.
TEST(MaskTripCounts, RowSeesAKeyIsSomeVisibleKey) {
  for (const MaskCase& c : mask_cases()) {
    const cuda::AttentionMask mask{c.sq, c.sk, c.causal, c.left, c.right};
    for (int i = 0; i < c.sq; ++i) {
      bool any = false;
      for (int j = 0; j < c.sk && !any; ++j) any = sees(c.sq, c.sk, c.causal, c.left, c.right, i, j);
      ASSERT_EQ(mask.row_sees_a_key(i), any) << "sq " << c.sq << " sk " << c.sk << (c.causal ? " causal" : "")
                                             << " window (" << c.left << ", " << c.right << "), row " << i;
    }
  }
}

// A 1k window over 16k keys: each 128-row query block runs at most 10 of the 256 key blocks of 64.
TEST(MaskTripCounts, AWindowCostsAboutItsOwnWork) {
  const cuda::AttentionMask mask{16384, 16384, true, 1024, -1};
  for (int m_block = 0; m_block < 128; ++m_block) {
    EXPECT_LE(mask.n_block_end(m_block, 128, 64) - mask.n_block_begin(m_block, 128, 64), 19) << m_block;
  }
  for (int n0 = 0; n0 < 16384; n0 += 128) {
    EXPECT_LE(mask.m_block_max(n0, 128, 64, 256) - mask.m_block_min(n0, 64), 19) << n0;
  }
}

// ---- the kernels against the reference ----

struct OptionCase {
  const char* name;
  AttentionShape shape;
  Layout layout;
  std::int64_t window_left = -1;
  std::int64_t window_right = -1;
  float softcap = 0.0f;
  int alibi = 0;  // 0: none, 1: (heads_q) slopes, 2: (batch, heads_q)
};

const std::vector<OptionCase>& option_cases() {
  static const std::vector<OptionCase> cases = {
      {"window_d64", {1, 1000, 1000, 2, 2, 64, false}, Layout::kContiguous, 100, 50},
      {"window_left_causal_d128", {1, 2049, 2049, 2, 1, 128, true}, Layout::kContiguous, 256, -1},
      {"window_1k_over_4k_causal_d64", {1, 4096, 4096, 1, 1, 64, true}, Layout::kContiguous, 1024, -1},
      {"window_right_only_q_shorter_d96", {1, 130, 1000, 4, 2, 96, false}, Layout::kPaddedAligned, -1, 40},
      {"window_q_longer_empty_rows_d32", {1, 1000, 200, 2, 2, 32, false}, Layout::kContiguous, 10, 3},
      {"window_zero_d64", {2, 300, 300, 2, 2, 64, false}, Layout::kContiguous, 0, 0},
      {"window_d256", {1, 333, 400, 2, 1, 256, true}, Layout::kContiguous, 70, -1},
      {"softcap_d64", {1, 1000, 1000, 2, 2, 64, false}, Layout::kContiguous, -1, -1, 5.0f},
      {"softcap_causal_gqa_d128", {1, 777, 777, 8, 2, 128, true}, Layout::kPaddedAligned, -1, -1, 1.0f},
      // sm90 d128: the softcap-only kernel, persistent (144 tiles for 132 SMs), bf16 with the row
      // max fixed at softcap (fwd_softmax.h's FwdSoftmaxBounded); above kBoundedSoftcapMax bf16 runs
      // the general score-option kernel, fp16 the softcap-only one with the running max.
      {"softcap_30_gqa_d128", {2, 200, 200, 36, 12, 128, false}, Layout::kContiguous, -1, -1, 30.0f},
      {"softcap_50_q_shorter_d128", {1, 600, 900, 2, 1, 128, false}, Layout::kContiguous, -1, -1, 50.0f},
      {"alibi_d64", {2, 500, 700, 2, 2, 64, false}, Layout::kContiguous, -1, -1, 0.0f, 1},
      {"alibi_per_batch_causal_mqa_d128", {2, 700, 500, 4, 1, 128, true}, Layout::kContiguous, -1, -1, 0.0f, 2},
      // sm90 d128: the ALiBi-only kernel on the persistent grid (144 tiles).
      {"alibi_q_shorter_gqa_d128", {2, 200, 300, 36, 6, 128, false}, Layout::kContiguous, -1, -1, 0.0f, 1},
      {"all_gqa_d64", {2, 1000, 1100, 4, 2, 64, false}, Layout::kPaddedAligned, 200, 30, 3.0f, 2},
      {"all_causal_d128", {1, 1500, 1200, 4, 2, 128, true}, Layout::kContiguous, 300, -1, 1.5f, 1},
      {"all_d40_staged", {1, 300, 257, 3, 1, 40, false}, Layout::kContiguous, 50, 20, 2.0f, 1},
      // The sm90 backward's option kernels (d128; session 12): a right-only window without causal,
      // and every option with a GQA group large enough for the launcher to split it over a cluster.
      {"window_right_only_d128", {1, 1000, 1000, 2, 2, 128, false}, Layout::kContiguous, -1, 100},
      {"all_causal_gqa_split_d128", {1, 700, 700, 8, 2, 128, true}, Layout::kContiguous, 128, -1, 2.0f, 2},
  };
  return cases;
}

using OptionParam = std::tuple<OptionCase, DType>;

std::string param_name(const ::testing::TestParamInfo<OptionParam>& info) {
  return std::string(std::get<0>(info.param).name) + (std::get<1>(info.param) == DType::kFloat16 ? "_fp16" : "_bf16");
}

std::uint64_t seed_of(const OptionParam& p) {
  std::uint64_t h = 0x51ed270b2f1c3a5dull;
  for (const char* c = std::get<0>(p).name; *c; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
  return h + static_cast<std::uint64_t>(std::get<1>(p));
}

AttentionTensors make_tensors(const OptionParam& param) {
  const auto& [c, dtype] = param;
  AttentionTensors t(c.shape, dtype, c.layout, seed_of(param));
  t.options.window_left = c.window_left;
  t.options.window_right = c.window_right;
  t.options.softcap = c.softcap;
  if (c.alibi != 0) {
    t.options.alibi_per_batch = c.alibi == 2;
    t.options.alibi_slopes = random_alibi_slopes(c.shape.heads_q * (c.alibi == 2 ? c.shape.batch : 1), seed_of(param));
  }
  return t;
}

class CudaScoreOptions : public ::testing::TestWithParam<OptionParam> {};

TEST_P(CudaScoreOptions, ForwardMatchesReferenceWithinTwiceTheSamePrecisionError) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  AttentionTensors t = make_tensors(GetParam());
  DeviceAttentionTensors dev(t);
  dev.poison_outputs();
  const Status status = forward(dev.forward_params());
  if (run_lacks_kernel(status, ::testing::UnitTest::GetInstance()->current_test_info()->name())) GTEST_SKIP() << status.message();
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  t.poison_forward_outputs();
  dev.download_forward_outputs(t);

  for (const Comparison& c : compare_forward_to_reference(t)) EXPECT_TRUE(c.ok) << c.message;
}

TEST_P(CudaScoreOptions, BackwardMatchesReferenceWithinThriceTheSamePrecisionError) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  AttentionTensors t = make_tensors(GetParam());
  // The forward's out and lse from the float64 reference (rounded), so this checks the backward alone.
  const ForwardParams host_fwd = t.forward_params(Backend::kCpuReference);
  ASSERT_TRUE(forward(host_fwd).ok());
  DeviceAttentionTensors dev(t);
  dev.out.upload(t.out);
  dev.lse.upload(t.lse);
  for (DeviceMirror* m : {&dev.dq, &dev.dk, &dev.dv}) m->poison();
  const Status status = backward(dev.backward_params());
  if (run_lacks_kernel(status, ::testing::UnitTest::GetInstance()->current_test_info()->name())) GTEST_SKIP() << status.message();
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  t.poison_backward_outputs();
  dev.download_backward_outputs(t);

  // A window of (0, 0) leaves each row one key: the exact dq and dk are 0 and so is the baseline's
  // error; accuracy.h's row-sum allowance covers what FlashAttention's dS = dP - D leaves there
  // (the H100 gave |dq| ~2e-6).
  for (const Comparison& c : compare_backward_to_reference(t, /*row_sum_allowance=*/true)) {
    EXPECT_TRUE(c.ok) << c.message;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaScoreOptions,
                         ::testing::Combine(::testing::ValuesIn(option_cases()),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16)),
                         param_name);

// Whether this build holds an sm90 row of the pass (`rows`, `count`: compiled_kernels()'s forward or
// backward table) serving window, softcap and ALiBi for `dtype` at `head_dim` and the current
// device can run it (generate.py's sm90 "variants": the forward at d64 and d128, the backward at d128).
template <class Row>
bool sm90_serves_options(const Row* rows, std::size_t count, DType dtype, int head_dim) {
  cuda::DeviceInfo device;
  if (!cuda::current_device("test", &device).ok()) return false;
  const unsigned wanted = cuda::KernelOption::kWindow | cuda::KernelOption::kSoftcap | cuda::KernelOption::kAlibi;
  for (std::size_t i = 0; i < count; ++i) {
    const Row& row = rows[i];
    if (row.family == KernelFamily::kSm90 && row.dtype == dtype && row.head_dim >= head_dim &&
        (row.options & wanted) == wanted && device.compute_capability >= row.min_cc &&
        device.compute_capability <= row.max_cc) {
      return true;
    }
  }
  return false;
}
bool sm90_forward_serves_options(DType dtype, int head_dim) {
  const cuda::CompiledKernels kernels = cuda::compiled_kernels();
  return sm90_serves_options(kernels.forward, kernels.forward_count, dtype, head_dim);
}
bool sm90_backward_serves_options(DType dtype, int head_dim) {
  const cuda::CompiledKernels kernels = cuda::compiled_kernels();
  return sm90_serves_options(kernels.backward, kernels.backward_count, dtype, head_dim);
}

// The options are dispatch data, per row: kernels=auto runs each pass on the newest family with a
// row that has them (sm90's option kernels on an H100, else sm80); a forced family without them
// fails with kNotSupported naming `kernels`.
TEST(CudaScoreOptionsDispatch, AutoPicksAFamilyWithTheOptionsPerPassAndAForcedFamilyWithoutThemIsRefused) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  AttentionTensors t({1, 256, 256, 2, 2, 128, true}, DType::kBFloat16, Layout::kContiguous, 31);
  t.options.window_left = 64;
  t.options.softcap = 10.0f;
  const bool sm90_forward = sm90_forward_serves_options(DType::kBFloat16, 128);
  DeviceAttentionTensors dev(t);
  ForwardParams params = dev.forward_params();
  KernelFamily family = KernelFamily::kAuto;
  ASSERT_TRUE(selected_kernels(params, &family).ok());
  EXPECT_EQ(family, sm90_forward ? KernelFamily::kSm90 : KernelFamily::kSm80);
  EXPECT_TRUE(forward(params).ok());
  params.kernels = KernelFamily::kSm90;
  const Status status = forward(params);
  if (sm90_forward) {
    EXPECT_TRUE(status.ok()) << status.message();
  } else {
    EXPECT_EQ(status.code(), StatusCode::kNotSupported);
    EXPECT_NE(status.message().find("kernels: "), std::string::npos) << status.message();
  }
  const bool sm90_backward = sm90_backward_serves_options(DType::kBFloat16, 128);
  BackwardParams bwd = dev.backward_params();
  KernelFamily bwd_family = KernelFamily::kAuto;
  ASSERT_TRUE(selected_kernels(bwd, &bwd_family).ok());
  EXPECT_EQ(bwd_family, sm90_backward ? KernelFamily::kSm90 : KernelFamily::kSm80);
  bwd.kernels = KernelFamily::kSm90;
  const Status bwd_status = backward(bwd);
  if (sm90_backward) {
    EXPECT_TRUE(bwd_status.ok()) << bwd_status.message();
  } else {
    EXPECT_EQ(bwd_status.code(), StatusCode::kNotSupported);
    EXPECT_NE(bwd_status.message().find("kernels: "), std::string::npos) << bwd_status.message();
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// A plain call keeps the plain kernels: with equal family and head dim, dispatch prefers the row
// with fewer options (the sm90 option kernels serve plain calls too, but slower). The plain row's
// only option may be varlen (a runtime path of the sm90 plain forward kernels).
TEST(CudaScoreOptionsDispatch, PlainCallsRunThePlainRow) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  AttentionTensors t({1, 256, 256, 2, 2, 128, false}, DType::kBFloat16, Layout::kContiguous, 34);
  DeviceAttentionTensors dev(t);
  detail::AttentionProblem problem;
  ASSERT_TRUE(detail::validate_forward(dev.forward_params(), &problem).ok());
  cuda::DeviceInfo device;
  ASSERT_TRUE(cuda::current_device("test", &device).ok());
  const cuda::FwdKernel* kernel = nullptr;
  ASSERT_TRUE(cuda::select_forward_kernel("test", problem, KernelFamily::kAuto, device, &kernel).ok());
  constexpr unsigned kVariantOptions = cuda::KernelOption::kWindow | cuda::KernelOption::kSoftcap |
                                      cuda::KernelOption::kAlibi | cuda::KernelOption::kDropout;
  EXPECT_EQ(kernel->options & kVariantOptions, cuda::KernelOption::kNone) << "options " << kernel->options;
}

TEST(CudaScoreOptionsErrors, SlopesOnTheHostAreRefusedNamingAlibiSlopes) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  AttentionTensors t({1, 64, 64, 2, 2, 64, false}, DType::kFloat16, Layout::kContiguous, 32);
  DeviceAttentionTensors dev(t);
  ForwardParams params = dev.forward_params();
  std::vector<float> slopes = {0.1f, 0.2f};
  params.alibi_slopes = make_view(slopes.data(), DType::kFloat32, Device::kCPU, {2});
  Status status = forward(params);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("alibi_slopes"), std::string::npos) << status.message();
  params.alibi_slopes.device = Device::kCUDA;  // a host pointer tagged as device memory
  status = forward(params);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("alibi_slopes"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace flashcore::testing
