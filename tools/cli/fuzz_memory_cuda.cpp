// CUDA device memory for `flashcore fuzz --device cuda` (CUDA builds only).
#include <cuda_runtime.h>

#include <string>

#include "fuzz_memory.h"

namespace flashcore::cli {
namespace {

Status check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::Ok();
  return Status::CudaError(std::string(what) + ": " + cudaGetErrorString(error));
}

class CudaStorage final : public DeviceStorage {
 public:
  ~CudaStorage() override {
    if (data_ != nullptr) cudaFree(data_);
  }
  Status allocate(std::size_t bytes) { return check(cudaMalloc(&data_, bytes), "cudaMalloc"); }
  void* data() override { return data_; }
  // cudaMemcpy waits for the legacy default stream, where the library's calls run (stream nullptr).
  Status upload(const void* host, std::size_t bytes) override {
    return check(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
  }
  Status download(void* host, std::size_t bytes) override {
    return check(cudaMemcpy(host, data_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
  }

 private:
  void* data_ = nullptr;
};

class CudaMemory final : public FuzzMemory {
 public:
  Device device() const override { return Device::kCUDA; }
  Status allocate(std::size_t bytes, std::unique_ptr<DeviceStorage>* storage) override {
    auto buffer = std::make_unique<CudaStorage>();
    const Status status = buffer->allocate(bytes);
    if (!status.ok()) return status;
    *storage = std::move(buffer);
    return Status::Ok();
  }
  Status synchronize() override {
    const Status launch = check(cudaGetLastError(), "a kernel launch");
    if (!launch.ok()) return launch;
    return check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
};

}  // namespace

Status make_cuda_memory(std::unique_ptr<FuzzMemory>* memory) {
  *memory = std::make_unique<CudaMemory>();
  return Status::Ok();
}

}  // namespace flashcore::cli
