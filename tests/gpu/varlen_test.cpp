// Variable-length batches on the GPU: the cases of tests/common/varlen_tensors.cpp, forward and
// backward against the float64 reference run sequence by sequence, fp16 and bf16, with the offsets
// in device memory. kernels=auto (on an H100: the sm90 forward, options and dropout included; the
// sm90 backward at d <= 128, on its option kernels with window/softcap/ALiBi (session 12); with
// dropout the sm80 backward, which reads the sm90 forward's LSE), then the forward alone on each
// family this build holds that serves the case (the sm90 forward: every case, on its option kernels
// where the case has options), then the backward on each family, in both modes (the sm90 backward:
// the cases without dropout).
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "common/varlen_tensors.h"
#include "cuda/dispatch.h"
#include "device_tensors.h"

namespace flashcore {
inline void PrintTo(DType dtype, std::ostream* os) { *os << dtype_name(dtype); }
}  // namespace flashcore

namespace flashcore::testing {
namespace {

using VarlenParam = std::tuple<VarlenCase, DType>;

// A device copy of host bytes, freed with the test.
struct DeviceCopy {
  void* data = nullptr;
  DeviceCopy(const void* host, std::size_t bytes) {
    if (cudaMalloc(&data, bytes) == cudaSuccess) cudaMemcpy(data, host, bytes, cudaMemcpyHostToDevice);
  }
  ~DeviceCopy() { cudaFree(data); }
};

class CudaVarlen : public ::testing::TestWithParam<VarlenParam> {};

// The case's tensors mirrored on the device (outputs poisoned) with device offsets and slopes.
struct DeviceVarlen {
  VarlenTensors& t;
  DeviceMirror q, k, v, dout, out, lse, dq, dk, dv;
  DeviceCopy cu_q, cu_k, slopes;
  explicit DeviceVarlen(VarlenTensors& t_)
      : t(t_), q(t.q), k(t.k), v(t.v), dout(t.dout), out(t.out), lse(t.lse), dq(t.dq), dk(t.dk), dv(t.dv),
        cu_q(t.cu_q.data(), t.cu_q.size() * sizeof(std::int32_t)),
        cu_k(t.cu_k.data(), t.cu_k.size() * sizeof(std::int32_t)),
        slopes(t.slopes.data(), t.slopes.size() * sizeof(float)) {
    for (auto [mirror, host] : {std::pair{&q, &t.q}, {&k, &t.k}, {&v, &t.v}, {&dout, &t.dout}}) mirror->upload(*host);
    for (DeviceMirror* m : {&out, &lse, &dq, &dk, &dv}) m->poison();
  }
  template <class Params>
  Params on_device(Params params) {
    params.q = q.view(), params.k = k.view(), params.v = v.view(), params.out = out.view(), params.lse = lse.view();
    params.cu_seqlens_q.data = cu_q.data, params.cu_seqlens_q.device = Device::kCUDA;
    params.cu_seqlens_k.data = cu_k.data, params.cu_seqlens_k.device = Device::kCUDA;
    if (params.alibi_slopes.present()) params.alibi_slopes.data = slopes.data, params.alibi_slopes.device = Device::kCUDA;
    return params;
  }
};

TEST_P(CudaVarlen, ForwardAndBackwardMatchThePerSequenceReference) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  VarlenTensors t(std::get<0>(GetParam()), std::get<1>(GetParam()));
  DeviceVarlen dev(t);
  Status status = forward(dev.on_device(t.forward_params(Backend::kCuda)));
  if (run_lacks_kernel(status, ::testing::UnitTest::GetInstance()->current_test_info()->name())) GTEST_SKIP() << status.message();
  ASSERT_TRUE(status.ok()) << status.message();
  BackwardParams bp = dev.on_device(t.backward_params(Backend::kCuda));
  bp.dout = dev.dout.view(), bp.dq = dev.dq.view(), bp.dk = dev.dk.view(), bp.dv = dev.dv.view();
  status = backward(bp);
  if (run_lacks_kernel(status, ::testing::UnitTest::GetInstance()->current_test_info()->name())) GTEST_SKIP() << status.message();
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  dev.out.download_into(t.out), dev.lse.download_into(t.lse);
  dev.dq.download_into(t.dq), dev.dk.download_into(t.dk), dev.dv.download_into(t.dv);
  for (const accuracy::Comparison& cmp : t.check()) EXPECT_TRUE(cmp.ok) << cmp.message;
}

// The forward on each family with a kernel for this dtype that serves the case's options (the
// dispatch's own answer: selected_kernels with the family forced), out and LSE checked.
TEST_P(CudaVarlen, ForwardOnEachFamilyMatchesThePerSequenceReference) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  int families_run = 0;
  for (KernelFamily family : {KernelFamily::kSm80, KernelFamily::kSm90}) {
    VarlenTensors t(std::get<0>(GetParam()), std::get<1>(GetParam()));
    DeviceVarlen dev(t);
    ForwardParams params = dev.on_device(t.forward_params(Backend::kCuda));
    params.kernels = family;
    KernelFamily chosen = KernelFamily::kAuto;
    if (!selected_kernels(params, &chosen).ok()) continue;  // not in this build, GPU or for these options
    SCOPED_TRACE(family == KernelFamily::kSm80 ? "kernels=sm80" : "kernels=sm90");
    const Status status = forward(params);
    ASSERT_TRUE(status.ok()) << status.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    dev.out.download_into(t.out), dev.lse.download_into(t.lse);
    for (const accuracy::Comparison& cmp : t.check(/*gradients*/ false)) EXPECT_TRUE(cmp.ok) << cmp.message;
    ++families_run;
  }
  if (families_run == 0) GTEST_SKIP() << "no kernel family of this build serves this case's forward";
}

// The backward on each family with a kernel that serves the case (after a kernels=auto forward), in
// the default and the deterministic mode (the sm90 backward walks a work list of key blocks in the first,
// each sequence's key blocks from a (slices, heads, sequences) grid in the second); a second
// deterministic run must give the same bits.
TEST_P(CudaVarlen, BackwardOnEachFamilyMatchesThePerSequenceReference) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  int runs = 0;
  for (KernelFamily family : {KernelFamily::kSm80, KernelFamily::kSm90}) {
    for (bool deterministic : {false, true}) {
      VarlenTensors t(std::get<0>(GetParam()), std::get<1>(GetParam()));
      DeviceVarlen dev(t);
      BackwardParams bp = dev.on_device(t.backward_params(Backend::kCuda));
      bp.dout = dev.dout.view(), bp.dq = dev.dq.view(), bp.dk = dev.dk.view(), bp.dv = dev.dv.view();
      bp.kernels = family;
      bp.deterministic = deterministic;
      KernelFamily chosen = KernelFamily::kAuto;
      if (!selected_kernels(bp, &chosen).ok()) continue;  // not in this build, GPU or for these options
      SCOPED_TRACE(std::string(family == KernelFamily::kSm80 ? "kernels=sm80" : "kernels=sm90") +
                   (deterministic ? ", deterministic" : ""));
      ASSERT_TRUE(forward(dev.on_device(t.forward_params(Backend::kCuda))).ok());
      Status status = backward(bp);
      ASSERT_TRUE(status.ok()) << status.message();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      dev.out.download_into(t.out), dev.lse.download_into(t.lse);
      dev.dq.download_into(t.dq), dev.dk.download_into(t.dk), dev.dv.download_into(t.dv);
      for (const accuracy::Comparison& cmp : t.check()) EXPECT_TRUE(cmp.ok) << cmp.message;
      if (deterministic) {
        const std::vector<double> dq = t.dq.values(), dk = t.dk.values(), dv = t.dv.values();
        for (DeviceMirror* m : {&dev.dq, &dev.dk, &dev.dv}) m->poison();
        status = backward(bp);
        ASSERT_TRUE(status.ok()) << status.message();
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        dev.dq.download_into(t.dq), dev.dk.download_into(t.dk), dev.dv.download_into(t.dv);
        EXPECT_TRUE(t.dq.values() == dq && t.dk.values() == dk && t.dv.values() == dv)
            << "deterministic backward gave different bits on a second run";
      }
      ++runs;
    }
  }
  if (runs == 0) GTEST_SKIP() << "no kernel family of this build serves this case's backward";
}

// On compute capability 9.0 with the sm90 forward built, kernels=auto runs varlen forwards there.
TEST(CudaVarlenDispatch, AutoRunsTheSm90ForwardOnHopper) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  if (const char* env = std::getenv("FLASHCORE_KERNELS"); env != nullptr && std::string(env) != "auto") {
    GTEST_SKIP() << "FLASHCORE_KERNELS=" << env << " overrides kernels=auto";
  }
  VarlenTensors t(varlen_cases()[0], DType::kBFloat16);
  DeviceVarlen dev(t);
  ForwardParams params = dev.on_device(t.forward_params(Backend::kCuda));
  params.kernels = KernelFamily::kSm90;
  KernelFamily forced = KernelFamily::kAuto;
  if (!selected_kernels(params, &forced).ok()) GTEST_SKIP() << "no sm90 forward for this GPU or build";
  params.kernels = KernelFamily::kAuto;
  KernelFamily family = KernelFamily::kAuto;
  ASSERT_TRUE(selected_kernels(params, &family).ok());
  EXPECT_EQ(family, KernelFamily::kSm90);
}

// The backward's routes (generate.py: the sm90 backward declares varlen at d64/d96/d128 only, and
// dropout on its d128 dropout kernel without varlen): on compute capability 9.0, wherever this
// build has the sm90 varlen forward at a head dim (the same head dims are built for both passes),
// kernels=auto must give a plain varlen backward at d64/d96/d128 to sm90, and one with dropout, or
// at d256, to sm80. A regeneration that lost a head dim's varlen option would otherwise pass
// silently: auto would run sm80, and forced-sm90 runs skip "family does not support" cases.
TEST(CudaVarlenDispatch, AutoRunsTheSm90BackwardOnHopper) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  if (const char* env = std::getenv("FLASHCORE_KERNELS"); env != nullptr && std::string(env) != "auto") {
    GTEST_SKIP() << "FLASHCORE_KERNELS=" << env << " overrides kernels=auto";
  }
  struct Route {
    std::int64_t head_dim;
    float dropout_p;
    KernelFamily expected;
  };
  const Route routes[] = {{64, 0.0f, KernelFamily::kSm90},  {96, 0.0f, KernelFamily::kSm90},
                          {128, 0.0f, KernelFamily::kSm90}, {128, 0.1f, KernelFamily::kSm80},
                          {256, 0.0f, KernelFamily::kSm80}};
  int checked = 0;
  for (const Route& route : routes) {
    VarlenCase c{"route", {37, 1, 130}, {37, 20, 64}, 4, 2, route.head_dim, true};
    c.dropout_p = route.dropout_p;
    VarlenTensors t(c, DType::kBFloat16);
    DeviceVarlen dev(t);
    ForwardParams fp = dev.on_device(t.forward_params(Backend::kCuda));
    fp.dropout_p = 0.0f;  // the sm90 forward serves varlen with and without dropout: ask for the plain one
    fp.kernels = KernelFamily::kSm90;
    KernelFamily forced = KernelFamily::kAuto;
    if (!selected_kernels(fp, &forced).ok()) continue;  // no sm90 kernels at this head dim, GPU or build
    SCOPED_TRACE("head_dim " + std::to_string(route.head_dim) + (route.dropout_p > 0.0f ? ", dropout" : ""));
    BackwardParams bp = dev.on_device(t.backward_params(Backend::kCuda));
    bp.dout = dev.dout.view(), bp.dq = dev.dq.view(), bp.dk = dev.dk.view(), bp.dv = dev.dv.view();
    bp.kernels = KernelFamily::kAuto;
    KernelFamily family = KernelFamily::kAuto;
    const Status status = selected_kernels(bp, &family);
    if (status.code() == StatusCode::kNotSupported) continue;  // a build without the backward pass
    ASSERT_TRUE(status.ok()) << status.message();
    EXPECT_EQ(kernel_family_name(family), kernel_family_name(route.expected));
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no sm90 varlen forward for this GPU or build";
}

// A device copy of a host tensor between two guard bands of a known byte: whatever a kernel
// writes outside the tensor's span lands in a band (within kGuardBytes of it) and shows.
class GuardedMirror {
 public:
  static constexpr std::size_t kGuardBytes = std::size_t{1} << 16;
  static constexpr unsigned char kGuardByte = 0x5A;
  explicit GuardedMirror(const HostTensor& host) : view_(host.view()) {
    std::int64_t last = 0;
    for (int i = 0; i < view_.rank; ++i) last += (view_.shape[i] - 1) * view_.stride[i];
    bytes_ = static_cast<std::size_t>(last + 1) * dtype_size(view_.dtype);
    if (cudaMalloc(&base_, bytes_ + 2 * kGuardBytes) != cudaSuccess) return;
    cudaMemset(base_, kGuardByte, bytes_ + 2 * kGuardBytes);
    cudaMemcpy(base_ + kGuardBytes, view_.data, bytes_, cudaMemcpyHostToDevice);
  }
  ~GuardedMirror() { cudaFree(base_); }
  GuardedMirror(const GuardedMirror&) = delete;
  GuardedMirror& operator=(const GuardedMirror&) = delete;
  TensorView view() const {
    TensorView t = view_;
    t.data = base_ + kGuardBytes;
    t.device = Device::kCUDA;
    return t;
  }
  // Bytes of the two bands that no longer hold kGuardByte.
  std::size_t damaged_guard_bytes() const {
    std::vector<unsigned char> band(kGuardBytes);
    std::size_t damaged = 0;
    for (const unsigned char* start : {base_, base_ + kGuardBytes + bytes_}) {
      if (cudaMemcpy(band.data(), start, kGuardBytes, cudaMemcpyDeviceToHost) != cudaSuccess) return kGuardBytes;
      for (unsigned char byte : band) damaged += byte != kGuardByte;
    }
    return damaged;
  }

 private:
  TensorView view_;
  std::size_t bytes_ = 0;
  unsigned char* base_ = nullptr;
};

// Review F1 (docs/reviews/session11.md): offsets on the GPU are not validated (attention.h), so bad
// ones (past the packed tensors, negative, not increasing) may give wrong numbers but must never
// make a kernel read or write outside the tensors. Forward then backward on each family and mode
// (the sm90 backward's work list, its dQ conversion and the shared preprocess included), causal and
// not; every tensor between guard bands. Run it under compute-sanitizer memcheck for the reads.
TEST(CudaVarlenBadOffsets, NoKernelLeavesTheTensors) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  // total_q = 500, total_k = 600; max_seqlen 200 / 250 (the valid lengths' maxima).
  const std::vector<std::vector<std::int32_t>> bad_offsets = {
      {0, 100, 450, 900, 1000},    // sequences past the end of the packed tensors
      {0, 300, 120, 400, 10},      // not increasing
      {-100, 50, 40, 2000, -300},  // negative and both
  };
  int runs = 0;
  for (bool causal : {false, true}) {
    for (std::int64_t head_dim : {64, 128}) {
      VarlenCase c{"bad_offsets", {100, 150, 50, 200}, {120, 80, 150, 250}, 4, 2, head_dim, causal};
      for (const std::vector<std::int32_t>& cu : bad_offsets) {
        for (KernelFamily family : {KernelFamily::kSm80, KernelFamily::kSm90}) {
          for (bool deterministic : {false, true}) {
            VarlenTensors t(c, DType::kBFloat16);
            GuardedMirror q(t.q), k(t.k), v(t.v), dout(t.dout), out(t.out), lse(t.lse), dq(t.dq), dk(t.dk), dv(t.dv);
            std::vector<std::int32_t> cu_k = cu;
            for (std::int32_t& o : cu_k) o += o > 0 ? 100 : 0;  // a different bad list for the keys
            DeviceCopy cu_q_dev(cu.data(), cu.size() * sizeof(std::int32_t));
            DeviceCopy cu_k_dev(cu_k.data(), cu_k.size() * sizeof(std::int32_t));
            ForwardParams fp = t.forward_params(Backend::kCuda);
            fp.q = q.view(), fp.k = k.view(), fp.v = v.view(), fp.out = out.view(), fp.lse = lse.view();
            fp.cu_seqlens_q.data = cu_q_dev.data, fp.cu_seqlens_q.device = Device::kCUDA;
            fp.cu_seqlens_k.data = cu_k_dev.data, fp.cu_seqlens_k.device = Device::kCUDA;
            fp.kernels = family;
            BackwardParams bp = t.backward_params(Backend::kCuda);
            bp.q = fp.q, bp.k = fp.k, bp.v = fp.v, bp.out = fp.out, bp.lse = fp.lse, bp.dout = dout.view();
            bp.dq = dq.view(), bp.dk = dk.view(), bp.dv = dv.view();
            bp.cu_seqlens_q = fp.cu_seqlens_q, bp.cu_seqlens_k = fp.cu_seqlens_k;
            bp.kernels = family;
            bp.deterministic = deterministic;
            KernelFamily chosen = KernelFamily::kAuto;
            if (!selected_kernels(fp, &chosen).ok() || !selected_kernels(bp, &chosen).ok()) continue;
            SCOPED_TRACE(std::string(family == KernelFamily::kSm80 ? "kernels=sm80" : "kernels=sm90") +
                         (deterministic ? ", deterministic" : "") + (causal ? ", causal" : "") +
                         ", d" + std::to_string(head_dim) + ", offsets " + std::to_string(cu[1]) + "," +
                         std::to_string(cu[2]) + ",...");
            Status status = forward(fp);
            ASSERT_TRUE(status.ok()) << status.message();
            status = backward(bp);
            ASSERT_TRUE(status.ok()) << status.message();
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            for (const GuardedMirror* m : {&q, &k, &v, &dout, &out, &lse, &dq, &dk, &dv}) {
              EXPECT_EQ(m->damaged_guard_bytes(), 0u);
            }
            ++runs;
          }
        }
      }
    }
  }
  if (runs == 0) GTEST_SKIP() << "no kernel family of this build serves the bad-offset cases";
}

INSTANTIATE_TEST_SUITE_P(Gpu, CudaVarlen,
                         ::testing::Combine(::testing::ValuesIn(varlen_cases()),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16)),
                         [](const ::testing::TestParamInfo<VarlenParam>& param_info) {
                           return std::string(std::get<0>(param_info.param).name) +
                                  (std::get<1>(param_info.param) == DType::kFloat16 ? "_fp16" : "_bf16");
                         });

}  // namespace
}  // namespace flashcore::testing
