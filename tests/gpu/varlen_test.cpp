// Variable-length batches on the GPU (every kernel family kernels=auto picks: sm90 falls back to
// sm80 for them): the cases of tests/common/varlen_tensors.cpp, forward and backward against the
// float64 reference run sequence by sequence, fp16 and bf16, with the offsets in device memory.
#include <cuda_runtime.h>

#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "common/varlen_tensors.h"
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

TEST_P(CudaVarlen, ForwardAndBackwardMatchThePerSequenceReference) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  VarlenTensors t(std::get<0>(GetParam()), std::get<1>(GetParam()));
  DeviceMirror q(t.q), k(t.k), v(t.v), dout(t.dout), out(t.out), lse(t.lse), dq(t.dq), dk(t.dk), dv(t.dv);
  for (auto [mirror, host] : {std::pair{&q, &t.q}, {&k, &t.k}, {&v, &t.v}, {&dout, &t.dout}}) mirror->upload(*host);
  for (DeviceMirror* m : {&out, &lse, &dq, &dk, &dv}) m->poison();
  DeviceCopy cu_q(t.cu_q.data(), t.cu_q.size() * sizeof(std::int32_t));
  DeviceCopy cu_k(t.cu_k.data(), t.cu_k.size() * sizeof(std::int32_t));
  DeviceCopy slopes(t.slopes.data(), t.slopes.size() * sizeof(float));
  auto on_device = [&](auto params) {
    params.q = q.view(), params.k = k.view(), params.v = v.view(), params.out = out.view(), params.lse = lse.view();
    params.cu_seqlens_q.data = cu_q.data, params.cu_seqlens_q.device = Device::kCUDA;
    params.cu_seqlens_k.data = cu_k.data, params.cu_seqlens_k.device = Device::kCUDA;
    if (params.alibi_slopes.present()) params.alibi_slopes.data = slopes.data, params.alibi_slopes.device = Device::kCUDA;
    return params;
  };
  Status status = forward(on_device(t.forward_params(Backend::kCuda)));
  ASSERT_TRUE(status.ok()) << status.message();
  BackwardParams bp = on_device(t.backward_params(Backend::kCuda));
  bp.dout = dout.view(), bp.dq = dq.view(), bp.dk = dk.view(), bp.dv = dv.view();
  status = backward(bp);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  out.download_into(t.out), lse.download_into(t.lse);
  dq.download_into(t.dq), dk.download_into(t.dk), dv.download_into(t.dv);
  for (const accuracy::Comparison& cmp : t.check()) EXPECT_TRUE(cmp.ok) << cmp.message;
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
