// Every bad input to forward() and backward() is rejected with kInvalidArgument, a message that
// names the argument and what was expected, and no output written (they stay NaN-poisoned).
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/attention_tensors.h"
#include "flashcore/attention.h"

namespace flashcore::testing {
namespace {

// Small but with GQA (4:2) so every dimension is distinct.
const AttentionShape kShape = {2, 5, 7, 4, 2, 16, false};

struct BadForward {
  const char* what;
  std::function<void(ForwardParams&)> spoil;
  std::vector<std::string> message_parts;  // the argument's name first
};

struct BadBackward {
  const char* what;
  std::function<void(BackwardParams&)> spoil;
  std::vector<std::string> message_parts;
};

void set_head_dim(TensorView& t, std::int64_t head_dim) { t.shape[3] = head_dim; }

::testing::AssertionResult rejected(const Status& status, const std::vector<std::string>& parts) {
  if (status.code() != StatusCode::kInvalidArgument) {
    return ::testing::AssertionFailure() << "expected kInvalidArgument, got code " << static_cast<int>(status.code())
                                         << " (" << status.message() << ")";
  }
  for (const std::string& part : parts) {
    if (status.message().find(part) == std::string::npos) {
      return ::testing::AssertionFailure() << "message \"" << status.message() << "\" lacks \"" << part << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

constexpr std::int64_t kHuge = std::numeric_limits<std::int64_t>::max() / 2;

const std::vector<BadForward>& bad_forward_inputs() {
  static const std::vector<BadForward> cases = {
      {"null q", [](ForwardParams& p) { p.q.data = nullptr; }, {": q: ", "is null"}},
      {"null k", [](ForwardParams& p) { p.k.data = nullptr; }, {": k: ", "is null"}},
      {"null v", [](ForwardParams& p) { p.v.data = nullptr; }, {": v: ", "is null"}},
      {"null out", [](ForwardParams& p) { p.out.data = nullptr; }, {": out: ", "is null"}},
      {"head_dim 0",
       [](ForwardParams& p) {
         for (TensorView* t : {&p.q, &p.k, &p.v, &p.out}) set_head_dim(*t, 0);
       },
       {": q: ", "dimension 3", "at least 1"}},
      {"q rank 3", [](ForwardParams& p) { p.q.rank = 3; }, {": q: ", "expected rank 4"}},
      {"heads_q not a multiple of heads_kv",
       [](ForwardParams& p) {
         p.k.shape[2] = 3;
         p.v.shape[2] = 3;
       },
       {": k: ", "heads_q (4) must be a multiple of heads_kv (3)"}},
      {"k batch mismatch", [](ForwardParams& p) { p.k.shape[0] = 1; }, {": k: ", "batch 1 does not match q's batch 2"}},
      {"v batch mismatch", [](ForwardParams& p) { p.v.shape[0] = 1; }, {": v: ", "expected shape"}},
      {"k head_dim mismatch", [](ForwardParams& p) { p.k.shape[3] = 8; }, {": k: ", "head_dim 8 does not match"}},
      {"v seqlen mismatch", [](ForwardParams& p) { p.v.shape[1] = 6; }, {": v: ", "expected shape (2, 7, 2, 16)"}},
      {"out shape mismatch", [](ForwardParams& p) { p.out.shape[1] = 4; }, {": out: ", "expected shape (2, 5, 4, 16)"}},
      {"k dtype mismatch",
       [](ForwardParams& p) { p.k.dtype = DType::kBFloat16; },
       {": k: ", "expected dtype float16, got bfloat16"}},
      {"out dtype mismatch",
       [](ForwardParams& p) { p.out.dtype = DType::kFloat32; },
       {": out: ", "expected dtype float16"}},
      {"q float32 on CUDA",
       [](ForwardParams& p) {
         for (TensorView* t : {&p.q, &p.k, &p.v, &p.out}) {
           t->dtype = DType::kFloat32;
           t->device = Device::kCUDA;
         }
         p.lse.device = Device::kCUDA;
         p.backend = Backend::kAuto;
       },
       {": q: ", "float32 inputs run on the CPU backends only"}},
      {"q last dim not contiguous",
       [](ForwardParams& p) { p.q.stride[3] = 2; },
       {": q: ", "last dimension must be contiguous"}},
      {"v last dim not contiguous",
       [](ForwardParams& p) { p.v.stride[3] = 3; },
       {": v: ", "last dimension must be contiguous"}},
      {"q stride overflows", [](ForwardParams& p) { p.q.stride[0] = kHuge; }, {": q: ", "overflow"}},
      {"k stride overflows at int64 max",
       [](ForwardParams& p) { p.k.stride[1] = std::numeric_limits<std::int64_t>::max(); },
       {": k: ", "overflow"}},
      {"k negative stride", [](ForwardParams& p) { p.k.stride[1] = -32; }, {": k: ", "negative"}},
      {"cpu tensors with backend cuda",
       [](ForwardParams& p) { p.backend = Backend::kCuda; },
       {": backend: ", "cuda needs CUDA tensors"}},
      {"cuda tensors with backend cpu",
       [](ForwardParams& p) {
         for (TensorView* t : {&p.q, &p.k, &p.v, &p.out, &p.lse}) t->device = Device::kCUDA;
         p.backend = Backend::kCpu;
       },
       {": backend: ", "cpu needs CPU tensors"}},
      {"cuda tensors with backend cpu_reference",
       [](ForwardParams& p) {
         for (TensorView* t : {&p.q, &p.k, &p.v, &p.out, &p.lse}) t->device = Device::kCUDA;
         p.backend = Backend::kCpuReference;
       },
       {": backend: ", "cpu_reference needs CPU tensors"}},
      {"out on another device",
       [](ForwardParams& p) { p.out.device = Device::kCUDA; },
       {": out: ", "expected a cpu tensor like q"}},
      {"unknown backend", [](ForwardParams& p) { p.backend = static_cast<Backend>(42); }, {": backend: ", "unknown"}},
      {"unknown kernel family",
       [](ForwardParams& p) { p.kernels = static_cast<KernelFamily>(9); },
       {": kernels: ", "unknown kernel family value 9"}},
      {"gpu kernel family on cpu tensors",
       [](ForwardParams& p) { p.kernels = KernelFamily::kSm80; },
       {": kernels: ", "sm80 names GPU kernels", "cpu"}},
      {"nan softmax_scale",
       [](ForwardParams& p) { p.softmax_scale = std::numeric_limits<float>::quiet_NaN(); },
       {": softmax_scale: ", "must be finite"}},
      {"infinite softmax_scale",
       [](ForwardParams& p) { p.softmax_scale = std::numeric_limits<float>::infinity(); },
       {": softmax_scale: ", "must be finite"}},
      {"negative num_threads", [](ForwardParams& p) { p.num_threads = -1; }, {": num_threads: ", ">= 0"}},
      {"lse wrong shape", [](ForwardParams& p) { p.lse.shape[2] = 6; }, {": lse: ", "expected shape (2, 4, 5)"}},
      {"lse wrong rank", [](ForwardParams& p) { p.lse.rank = 4; }, {": lse: ", "expected rank 3"}},
      {"lse wrong dtype",
       [](ForwardParams& p) { p.lse.dtype = DType::kFloat16; },
       {": lse: ", "expected dtype float32"}},
  };
  return cases;
}

TEST(Validation, EveryBadForwardInputIsRejectedAndNothingIsWritten) {
  for (const BadForward& c : bad_forward_inputs()) {
    AttentionTensors t(kShape, DType::kFloat16, Layout::kContiguous, 1);
    ForwardParams params = t.forward_params(Backend::kCpu);
    c.spoil(params);
    EXPECT_TRUE(rejected(forward(params), c.message_parts)) << c.what;
    EXPECT_TRUE(t.out.all_poisoned() && t.lse.all_poisoned()) << c.what << ": an output was written";
  }
}

TEST(Validation, HeadDimAbove256IsRejected) {
  AttentionTensors t({1, 3, 3, 1, 1, 257, false}, DType::kBFloat16, Layout::kContiguous, 1);
  EXPECT_TRUE(rejected(forward(t.forward_params(Backend::kCpu)),
                       {"flashcore::forward: q: ", "head_dim must be at most 256, got 257"}));
  EXPECT_TRUE(t.out.all_poisoned() && t.lse.all_poisoned());
  EXPECT_TRUE(rejected(backward(t.backward_params(Backend::kCpu)), {"flashcore::backward: q: ", "at most 256"}));
  EXPECT_TRUE(t.dq.all_poisoned() && t.dk.all_poisoned() && t.dv.all_poisoned());
}

TEST(Validation, EveryBadBackwardInputIsRejectedAndNothingIsWritten) {
  const std::vector<BadBackward> cases = {
      {"null q", [](BackwardParams& p) { p.q.data = nullptr; }, {"flashcore::backward: q: ", "is null"}},
      {"null dout", [](BackwardParams& p) { p.dout.data = nullptr; }, {": dout: ", "is null"}},
      {"null out", [](BackwardParams& p) { p.out.data = nullptr; }, {": out: ", "is null"}},
      {"null lse", [](BackwardParams& p) { p.lse.data = nullptr; }, {": lse: ", "is null"}},
      {"null dq", [](BackwardParams& p) { p.dq.data = nullptr; }, {": dq: ", "is null"}},
      {"null dk", [](BackwardParams& p) { p.dk.data = nullptr; }, {": dk: ", "is null"}},
      {"null dv", [](BackwardParams& p) { p.dv.data = nullptr; }, {": dv: ", "is null"}},
      {"head_dim 0",
       [](BackwardParams& p) {
         for (TensorView* t : {&p.q, &p.k, &p.v, &p.out, &p.dout, &p.dq, &p.dk, &p.dv}) set_head_dim(*t, 0);
       },
       {": q: ", "at least 1"}},
      {"heads_q not a multiple of heads_kv",
       [](BackwardParams& p) {
         for (TensorView* t : {&p.k, &p.v, &p.dk, &p.dv}) t->shape[2] = 3;
       },
       {": k: ", "must be a multiple of heads_kv"}},
      {"dk batch mismatch", [](BackwardParams& p) { p.dk.shape[0] = 1; }, {": dk: ", "expected shape (2, 7, 2, 16)"}},
      {"dq dtype mismatch",
       [](BackwardParams& p) { p.dq.dtype = DType::kBFloat16; },
       {": dq: ", "expected dtype float16"}},
      {"dout dtype mismatch",
       [](BackwardParams& p) { p.dout.dtype = DType::kFloat32; },
       {": dout: ", "expected dtype float16"}},
      {"dv last dim not contiguous", [](BackwardParams& p) { p.dv.stride[3] = 4; }, {": dv: ", "contiguous"}},
      {"dq stride overflows", [](BackwardParams& p) { p.dq.stride[1] = kHuge; }, {": dq: ", "overflow"}},
      {"lse wrong shape", [](BackwardParams& p) { p.lse.shape[1] = 2; }, {": lse: ", "expected shape (2, 4, 5)"}},
      {"lse wrong dtype",
       [](BackwardParams& p) { p.lse.dtype = DType::kBFloat16; },
       {": lse: ", "expected dtype float32"}},
      {"cpu tensors with backend cuda",
       [](BackwardParams& p) { p.backend = Backend::kCuda; },
       {": backend: ", "cuda needs CUDA tensors"}},
      {"cuda tensors with backend cpu",
       [](BackwardParams& p) {
         for (TensorView* t : {&p.q, &p.k, &p.v, &p.out, &p.dout, &p.lse, &p.dq, &p.dk, &p.dv})
           t->device = Device::kCUDA;
         p.backend = Backend::kCpu;
       },
       {": backend: ", "cpu needs CPU tensors"}},
      {"dk on another device",
       [](BackwardParams& p) { p.dk.device = Device::kCUDA; },
       {": dk: ", "expected a cpu tensor"}},
      {"infinite softmax_scale",
       [](BackwardParams& p) { p.softmax_scale = -std::numeric_limits<float>::infinity(); },
       {": softmax_scale: ", "must be finite"}},
      {"workspace size without workspace",
       [](BackwardParams& p) { p.workspace_bytes = 64; },
       {": workspace: ", "is null but workspace_bytes is 64"}},
  };
  for (const BadBackward& c : cases) {
    AttentionTensors t(kShape, DType::kFloat16, Layout::kPadded, 2);
    BackwardParams params = t.backward_params(Backend::kCpu);
    c.spoil(params);
    EXPECT_TRUE(rejected(backward(params), c.message_parts)) << c.what;
    EXPECT_TRUE(t.dq.all_poisoned() && t.dk.all_poisoned() && t.dv.all_poisoned())
        << c.what << ": an output was written";
    std::size_t bytes = 12345;
    EXPECT_TRUE(rejected(backward_workspace_size(params, &bytes), c.message_parts)) << c.what;
    EXPECT_EQ(bytes, 12345u) << c.what;
  }
}

// The largest element offset is exactly INT64_MAX: one past it (the byte count's element count)
// no longer fits.
TEST(Validation, StrideReachingInt64MaxIsRejected) {
  AttentionTensors t({2, 1, 1, 1, 1, 16, false}, DType::kFloat16, Layout::kContiguous, 5);
  ForwardParams params = t.forward_params(Backend::kCpu);
  params.q.stride[0] = std::numeric_limits<std::int64_t>::max() - 15;
  EXPECT_TRUE(rejected(forward(params), {": q: ", "overflow"}));
  EXPECT_TRUE(t.out.all_poisoned() && t.lse.all_poisoned());
}

TEST(Validation, WorkspaceSizeNeedsAnOutputPointer) {
  AttentionTensors t(kShape, DType::kFloat16, Layout::kContiguous, 3);
  EXPECT_TRUE(rejected(backward_workspace_size(t.backward_params(Backend::kCpu), nullptr), {": bytes: ", "is null"}));
}

// The good params the cases above spoil are accepted, so each rejection is the spoiled argument's.
TEST(Validation, TheUnspoiledParamsAreAccepted) {
  AttentionTensors t(kShape, DType::kFloat16, Layout::kPadded, 4);
  Status status = forward(t.forward_params(Backend::kCpu));
  EXPECT_TRUE(status.ok()) << status.message();
  status = backward(t.backward_params(Backend::kCpu));
  EXPECT_TRUE(status.ok()) << status.message();
  std::size_t bytes = 1;
  status = backward_workspace_size(t.backward_params(Backend::kCpu), &bytes);
  EXPECT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(bytes, 0u);
}

}  // namespace
}  // namespace flashcore::testing
