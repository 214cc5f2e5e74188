// More than 2^31 elements in every tensor, forward and backward, on each kernel family: the batch
// offset of the last batches no longer fits in 32 bits, so any int32 index arithmetic in a kernel
// (or a TMA descriptor's sizes) shows up as wrong numbers there. Three batches (the first, the one
// straddling element 2^31, the last) hold random data and are checked against the float64
// reference; the rest hold a constant. Needs ~46 GB of device memory, skipped where there is less.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/problem.h"
#include "common/attention_tensors.h"
#include "common/reference_problem.h"
#include "cpu/reference.h"
#include "device_tensors.h"
#include "flashcore/accuracy.h"
#include "flashcore/attention.h"

namespace flashcore::testing {
namespace {

using namespace flashcore::accuracy;

// Batch stays within the CUDA kernels' 65,535 (a grid dimension).
constexpr std::int64_t kSeqlen = 100, kHeads = 4, kHeadDim = 128;
constexpr std::int64_t kPerBatch = kSeqlen * kHeads * kHeadDim;  // 51,200 elements
constexpr std::int64_t kBatch = (std::int64_t{1} << 31) / kPerBatch + 7;  // 41,950: 2.148e9 elements

struct DeviceBuffer {
  explicit DeviceBuffer(std::size_t bytes) { ok = cudaMalloc(&data, bytes) == cudaSuccess; }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data = nullptr;
  bool ok = false;
};

char* at_batch(const DeviceBuffer& b, std::int64_t batch, std::int64_t per_batch, std::size_t element_bytes) {
  return static_cast<char*>(b.data) + static_cast<std::size_t>(batch * per_batch) * element_bytes;
}

void run_family(KernelFamily family) {
  const std::size_t tensor_bytes = static_cast<std::size_t>(kBatch * kPerBatch) * 2;
  std::size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  if (free_bytes < tensor_bytes * 8 + (std::size_t{14} << 30)) {
    GTEST_SKIP() << "needs ~46 GB of free device memory, this device has " << (free_bytes >> 30) << " GB";
  }
  const DType dtype = DType::kBFloat16;
  DeviceBuffer q(tensor_bytes), k(tensor_bytes), v(tensor_bytes), out(tensor_bytes), dout(tensor_bytes),
      dq(tensor_bytes), dk(tensor_bytes), dv(tensor_bytes);
  DeviceBuffer lse(static_cast<std::size_t>(kBatch * kHeads * kSeqlen) * 4);
  for (DeviceBuffer* b : {&q, &k, &v, &out, &dout, &dq, &dk, &dv, &lse}) ASSERT_TRUE(b->ok) << "cudaMalloc";
  // 0x3C3C is 0.0115 in bf16: the batches not checked hold a finite constant; outputs start NaN.
  for (DeviceBuffer* b : {&q, &k, &v, &dout}) ASSERT_EQ(cudaMemset(b->data, 0x3C, tensor_bytes), cudaSuccess);
  for (DeviceBuffer* b : {&out, &dq, &dk, &dv}) ASSERT_EQ(cudaMemset(b->data, 0xFF, tensor_bytes), cudaSuccess);

  const std::int64_t checked[] = {0, (std::int64_t{1} << 31) / kPerBatch, kBatch - 1};
  std::vector<AttentionTensors> slices;
  for (std::int64_t b : checked) {
    slices.emplace_back(AttentionShape{1, kSeqlen, kSeqlen, kHeads, kHeads, kHeadDim, true}, dtype,
                        Layout::kContiguous, 40 + b);
    const AttentionTensors& t = slices.back();
    for (const auto& [host, device] : {std::pair{&t.q, &q}, {&t.k, &k}, {&t.v, &v}, {&t.dout, &dout}}) {
      ASSERT_EQ(cudaMemcpy(at_batch(*device, b, kPerBatch, 2), host->view().data, kPerBatch * 2,
                           cudaMemcpyHostToDevice),
                cudaSuccess);
    }
  }

  const auto view = [&](const DeviceBuffer& b) {
    return make_view(b.data, dtype, Device::kCUDA, {kBatch, kSeqlen, kHeads, kHeadDim});
  };
  ForwardParams fwd;
  fwd.q = view(q), fwd.k = view(k), fwd.v = view(v), fwd.out = view(out);
  fwd.lse = make_view(lse.data, DType::kFloat32, Device::kCUDA, {kBatch, kHeads, kSeqlen});
  fwd.causal = true;
  fwd.kernels = family;
  Status status = forward(fwd);
  ASSERT_TRUE(status.ok()) << status.message();
  BackwardParams bwd;
  bwd.q = fwd.q, bwd.k = fwd.k, bwd.v = fwd.v, bwd.out = fwd.out, bwd.lse = fwd.lse, bwd.dout = view(dout);
  bwd.dq = view(dq), bwd.dk = view(dk), bwd.dv = view(dv);
  bwd.causal = true;
  bwd.kernels = family;
  status = backward(bwd);
  if (status.code() == StatusCode::kNotSupported) {
    bwd.kernels = KernelFamily::kAuto;
    status = backward(bwd);
  }
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  for (std::size_t i = 0; i < slices.size(); ++i) {
    AttentionTensors& t = slices[i];
    const std::int64_t b = checked[i];
    SCOPED_TRACE("batch " + std::to_string(b) + " of " + std::to_string(kBatch));
    for (const auto& [host, device] : {std::pair{&t.out, &out}, {&t.dq, &dq}, {&t.dk, &dk}, {&t.dv, &dv}}) {
      ASSERT_EQ(cudaMemcpy(host->view().data, at_batch(*device, b, kPerBatch, 2), kPerBatch * 2,
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
    ASSERT_EQ(cudaMemcpy(t.lse.view().data, at_batch(lse, b, kHeads * kSeqlen, 4), kHeads * kSeqlen * 4,
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    const BackwardParams ref_params = t.backward_params(Backend::kCpuReference);
    detail::AttentionProblem problem;
    ASSERT_TRUE(detail::validate_backward(ref_params, &problem).ok());
    std::vector<double> ref_out, ref_lse, ref_dq, ref_dk, ref_dv;
    ASSERT_TRUE(cpu::reference_forward_f64(t.forward_params(Backend::kCpuReference), problem, &ref_out, &ref_lse).ok());
    ASSERT_TRUE(cpu::reference_backward_f64(ref_params, problem, &ref_dq, &ref_dk, &ref_dv).ok());
    const BaselineForward base = baseline_forward(reference_problem(problem), dtype, t.q.values(), t.k.values(),
                                                  t.v.values());
    const BaselineBackward base_bwd = baseline_backward(reference_problem(problem), dtype, t.q.values(),
                                                        t.k.values(), t.v.values(), t.dout.values());
    for (const Comparison& c : {compare_to_reference("out", dtype, 2.0, t.out.values(), base.out, ref_out),
                                compare_to_reference("lse", DType::kFloat32, 2.0, t.lse.values(), base.lse, ref_lse),
                                compare_to_reference("dq", dtype, 3.0, t.dq.values(), base_bwd.dq, ref_dq),
                                compare_to_reference("dk", dtype, 3.0, t.dk.values(), base_bwd.dk, ref_dk),
                                compare_to_reference("dv", dtype, 3.0, t.dv.values(), base_bwd.dv, ref_dv)}) {
      EXPECT_TRUE(c.ok) << c.message;
    }
  }
}

TEST(CudaLargeTensors, MoreThan2To31ElementsSm80) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  run_family(KernelFamily::kSm80);
}

TEST(CudaLargeTensors, MoreThan2To31ElementsSm90) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  int device = 0, major = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (major != 9) GTEST_SKIP() << "the sm90 kernels need compute capability 9.0";
  run_family(KernelFamily::kSm90);
}

}  // namespace
}  // namespace flashcore::testing
