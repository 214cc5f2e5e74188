// Every compiled kernel once, on small ragged shapes, for compute-sanitizer (scripts/device.sh
// sweep runs this test under memcheck, racecheck, synccheck and initcheck): each forward and each
// backward row of the dispatch table (family x dtype x head dim x the score options it serves),
// causal and not, GQA, seqlen_q != seqlen_k both ways with tails that fill no tile, and the
// backward in both modes (atomic dQ and deterministic). Results are also checked against the
// float64 reference, so a kernel the sweep reaches is a kernel that works.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/problem.h"
#include "common/attention_tensors.h"
#include "common/reference_problem.h"
#include "cpu/reference.h"
#include "cuda/device.h"
#include "cuda/dispatch.h"
#include "device_tensors.h"
#include "flashcore/accuracy.h"
#include "flashcore/attention.h"

namespace flashcore::testing {
namespace {

using namespace flashcore::accuracy;

// Small enough for racecheck, ragged against every tile size the families use (64..192 rows).
const AttentionShape kSweepShapes[] = {
    {2, 77, 130, 4, 2, 0, false},   // keys longer, GQA 2:1
    {1, 130, 77, 2, 1, 0, true},    // queries longer (rows that see no key), MQA
    {1, 200, 200, 2, 2, 0, true},   // square causal across two query tiles
};

// The options a row serves, switched on so the row is the one that runs.
void apply_row_options(unsigned options, AttentionTensors& t) {
  if (options & cuda::KernelOption::kWindow) {
    t.options.window_left = 40;
    t.options.window_right = 8;
  }
  if (options & cuda::KernelOption::kSoftcap) t.options.softcap = 20.0f;
  if (options & cuda::KernelOption::kAlibi) t.options.alibi_slopes = random_alibi_slopes(t.shape.heads_q, 5);
  if (options & cuda::KernelOption::kDropout) {
    t.options.dropout_p = 0.17f;
    t.options.dropout_seed = 0x5eed;
    t.options.dropout_offset = 3;
  }
}

std::string row_name(const char* pass, KernelFamily family, DType dtype, int head_dim, unsigned options) {
  return std::string(pass) + " " + kernel_family_name(family) + " " + dtype_name(dtype) + " d" +
         std::to_string(head_dim) + " options=" + std::to_string(options);
}

bool served_here(int min_cc, int max_cc) {
  cuda::DeviceInfo device;
  if (!cuda::current_device("sweep", &device).ok()) return false;
  return device.compute_capability >= min_cc && device.compute_capability <= max_cc;
}

// A row runs plain on every shape and, when it serves score options, with all of them on the first.
std::vector<unsigned> option_modes(unsigned row_options, std::size_t shape_index) {
  if (row_options != 0 && shape_index == 0) return {0u, row_options};
  return {0u};
}

// Forward on `fwd_family`, then (when `backward`) the backward on `bwd_family`, both checked.
void run_and_check(AttentionTensors& t, KernelFamily fwd_family, bool backward_pass, KernelFamily bwd_family,
                   bool deterministic) {
  DeviceAttentionTensors dev(t);
  dev.poison_outputs();
  ForwardParams fwd = dev.forward_params();
  fwd.kernels = fwd_family;
  KernelFamily ran = KernelFamily::kAuto;
  ASSERT_TRUE(selected_kernels(fwd, &ran).ok());
  if (fwd_family != KernelFamily::kAuto) {
    ASSERT_EQ(ran, fwd_family);
  }
  Status status = forward(fwd);
  ASSERT_TRUE(status.ok()) << status.message();
  if (backward_pass) {
    BackwardParams bwd = dev.backward_params();
    bwd.kernels = bwd_family;
    bwd.deterministic = deterministic;
    ASSERT_TRUE(selected_kernels(bwd, &ran).ok());
    ASSERT_EQ(ran, bwd_family);
    status = backward(bwd);
    ASSERT_TRUE(status.ok()) << status.message();
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  t.poison_forward_outputs();
  dev.download_forward_outputs(t);
  if (backward_pass) {
    t.poison_backward_outputs();
    dev.download_backward_outputs(t);
  }

  const BackwardParams ref_params = t.backward_params(Backend::kCpuReference);
  detail::AttentionProblem problem;
  ASSERT_TRUE(detail::validate_backward(ref_params, &problem).ok());
  std::vector<double> ref_out, ref_lse;
  ASSERT_TRUE(cpu::reference_forward_f64(t.forward_params(Backend::kCpuReference), problem, &ref_out, &ref_lse).ok());
  std::vector<double> slopes;  // the ALiBi slopes reference_problem points to
  const ReferenceProblem reference = reference_problem(problem, &slopes);
  const BaselineForward base = baseline_forward(reference, problem.dtype, t.q.values(), t.k.values(), t.v.values());
  for (const Comparison& c :
       {compare_to_reference("out", t.dtype, 2.0, t.out.values(), base.out, ref_out),
        compare_to_reference("lse", DType::kFloat32, 2.0, t.lse.values(), base.lse, ref_lse)}) {
    EXPECT_TRUE(c.ok) << c.message;
  }
  if (!backward_pass) return;
  std::vector<double> ref_dq, ref_dk, ref_dv;
  ASSERT_TRUE(cpu::reference_backward_f64(ref_params, problem, &ref_dq, &ref_dk, &ref_dv).ok());
  const BaselineBackward base_bwd = baseline_backward(reference, problem.dtype, t.q.values(), t.k.values(),
                                                      t.v.values(), t.dout.values());
  for (const Comparison& c : {compare_to_reference("dq", t.dtype, 3.0, t.dq.values(), base_bwd.dq, ref_dq),
                              compare_to_reference("dk", t.dtype, 3.0, t.dk.values(), base_bwd.dk, ref_dk),
                              compare_to_reference("dv", t.dtype, 3.0, t.dv.values(), base_bwd.dv, ref_dv)}) {
    EXPECT_TRUE(c.ok) << c.message;
  }
}

// The sweep picks every family itself: FLASHCORE_KERNELS (which forces the family of kernels=auto
// calls) is set to auto while it runs and restored after.
class KernelsEnvironmentAuto {
 public:
  KernelsEnvironmentAuto() {
    if (const char* value = std::getenv("FLASHCORE_KERNELS")) saved_ = value;
    setenv("FLASHCORE_KERNELS", "auto", 1);
  }
  ~KernelsEnvironmentAuto() {
    if (saved_.empty()) {
      unsetenv("FLASHCORE_KERNELS");
    } else {
      setenv("FLASHCORE_KERNELS", saved_.c_str(), 1);
    }
  }

 private:
  std::string saved_;
};

TEST(CudaSanitizeSweep, EveryCompiledKernel) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const KernelsEnvironmentAuto kernels_auto;
  const cuda::CompiledKernels kernels = cuda::compiled_kernels();
  int forward_rows = 0, backward_rows = 0;
  for (std::size_t i = 0; i < kernels.forward_count; ++i) {
    const cuda::FwdKernel& row = kernels.forward[i];
    if (!served_here(row.min_cc, row.max_cc)) continue;
    ++forward_rows;
    for (std::size_t s = 0; s < std::size(kSweepShapes); ++s) {
      AttentionShape shape = kSweepShapes[s];
      shape.head_dim = row.head_dim;
      for (unsigned options : option_modes(row.options, s)) {
        SCOPED_TRACE(row_name("forward", row.family, row.dtype, row.head_dim, options) + " " + shape_name(shape));
        AttentionTensors t(shape, row.dtype, Layout::kPaddedAligned, 100 + i);
        apply_row_options(options, t);
        run_and_check(t, row.family, /*backward_pass=*/false, KernelFamily::kAuto, false);
      }
    }
  }
  for (std::size_t i = 0; i < kernels.backward_count; ++i) {
    const cuda::BwdKernel& row = kernels.backward[i];
    if (!served_here(row.min_cc, row.max_cc)) continue;
    ++backward_rows;
    for (std::size_t s = 0; s < std::size(kSweepShapes); ++s) {
      AttentionShape shape = kSweepShapes[s];
      shape.head_dim = row.head_dim;
      for (unsigned options : option_modes(row.options, s)) {
        for (bool deterministic : {false, true}) {
          SCOPED_TRACE(row_name(deterministic ? "backward (deterministic)" : "backward", row.family, row.dtype,
                                row.head_dim, options) +
                       " " + shape_name(shape));
          AttentionTensors t(shape, row.dtype, Layout::kPaddedAligned, 200 + i);
          apply_row_options(options, t);
          run_and_check(t, KernelFamily::kAuto, /*backward_pass=*/true, row.family, deterministic);
        }
      }
    }
  }
  std::printf("sweep: %d forward and %d backward kernel rows on this device\n", forward_rows, backward_rows);
  EXPECT_GT(forward_rows + backward_rows, 0);
}

}  // namespace
}  // namespace flashcore::testing
