// The paged varlen forward on CUDA (attention.h, "paged"; src/cuda/paged_kv.cu gathers the pages on
// the device): a paged call gives exactly what the same call gives on the packed keys the pages hold
// (common/paged_varlen_tensors.h builds them by hand), both on the GPU, fp16 and bf16, with page
// sizes 7, 16 and 256, an empty sequence, decoding rows, a window and head dim 40 (staged).
#include <cuda_runtime.h>

#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "common/paged_varlen_tensors.h"
#include "device_tensors.h"

namespace flashcore::testing {
namespace {

// A device copy of a small host int32 vector, viewed like `host`.
class DeviceIndices {
 public:
  explicit DeviceIndices(const TensorView& host) : view_(host) {
    const size_t bytes = static_cast<size_t>(host.numel()) * sizeof(std::int32_t);
    EXPECT_EQ(cudaMalloc(&data_, bytes), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data_, host.data, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    view_.data = data_;
    view_.device = Device::kCUDA;
  }
  ~DeviceIndices() { cudaFree(data_); }
  DeviceIndices(const DeviceIndices&) = delete;
  DeviceIndices& operator=(const DeviceIndices&) = delete;
  const TensorView& view() const { return view_; }

 private:
  TensorView view_;
  void* data_ = nullptr;
};

// Runs the paged or the packed call of `t` on the GPU and downloads its out and lse.
Status run_on_gpu(PagedTensors& t, bool paged) {
  ForwardParams p = t.params(Backend::kCuda, paged);
  DeviceMirror q(t.q), k(paged ? t.k_pages : t.k_packed), v(paged ? t.v_pages : t.v_packed);
  HostTensor& out_host = paged ? t.out_paged : t.out_packed;
  HostTensor& lse_host = paged ? t.lse_paged : t.lse_packed;
  DeviceMirror out(out_host), lse(lse_host);
  q.upload(t.q);
  k.upload(paged ? t.k_pages : t.k_packed);
  v.upload(paged ? t.v_pages : t.v_packed);
  out.poison();
  lse.poison();
  DeviceIndices cu_q(p.cu_seqlens_q), cu_k(p.cu_seqlens_k);
  std::vector<std::int32_t> no_table{0};
  DeviceIndices table(paged ? p.block_table : make_view(no_table.data(), DType::kInt32, Device::kCPU, {1}));
  p.q = q.view();
  p.k = k.view();
  p.v = v.view();
  p.out = out.view();
  p.lse = lse.view();
  p.cu_seqlens_q = cu_q.view();
  p.cu_seqlens_k = cu_k.view();
  if (paged) p.block_table = table.view();
  const Status status = forward(p);
  if (!status.ok()) return status;
  if (const cudaError_t error = cudaDeviceSynchronize(); error != cudaSuccess) {
    return Status::CudaError(std::string("cudaDeviceSynchronize: ") + cudaGetErrorString(error));
  }
  out.download_into(out_host);
  lse.download_into(lse_host);
  return Status::Ok();
}

class CudaPagedVarlen : public ::testing::TestWithParam<std::tuple<PagedCase, DType>> {};

TEST_P(CudaPagedVarlen, EqualsTheSameCallOnThePackedKeys) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  PagedTensors t(std::get<0>(GetParam()), std::get<1>(GetParam()));
  Status status = run_on_gpu(t, /*paged=*/true);
  ASSERT_TRUE(status.ok()) << status.message();
  status = run_on_gpu(t, /*paged=*/false);
  ASSERT_TRUE(status.ok()) << status.message();
  const std::vector<double> out_paged = t.out_paged.values(), out_packed = t.out_packed.values();
  const std::vector<double> lse_paged = t.lse_paged.values(), lse_packed = t.lse_packed.values();
  for (size_t i = 0; i < out_paged.size(); ++i) ASSERT_EQ(out_paged[i], out_packed[i]) << "out element " << i;
  for (size_t i = 0; i < lse_paged.size(); ++i) ASSERT_EQ(lse_paged[i], lse_packed[i]) << "lse element " << i;
}

INSTANTIATE_TEST_SUITE_P(Gpu, CudaPagedVarlen,
                         ::testing::Combine(::testing::ValuesIn(paged_cases()),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16)));

}  // namespace
}  // namespace flashcore::testing
