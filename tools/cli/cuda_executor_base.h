// What the CUDA executors share (CUDA builds only): device buffers for one problem in the
// implementation's element type, inputs copied in, CUDA-event timing on the default stream,
// NaN poisoning, read-back, and the memory measurement.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <vector>

#include "runner.h"

namespace flashcore::cli {

Status cuda_status(cudaError_t error, const char* what);

// One cudaMalloc'd buffer, freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  Status allocate(std::size_t bytes, const char* name);
  Status upload(const std::vector<std::byte>& host, const char* name);
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

class CudaExecutorBase : public Executor {
 public:
  ~CudaExecutorBase() override;
  Status synchronize() override;
  Status poison_outputs() override;
  Status read_outputs(HostOutputs* outputs) override;
  Status begin_pass() override;
  Status end_forward() override;
  Status end_pass(double* forward_ms, double* total_ms) override;
  // Scratch beyond inputs and outputs: `extra_workspace_` (what the executor allocated for the
  // implementation) plus the high-water mark of the device's default memory pool during the run,
  // which sees scratch an implementation takes with cudaMallocAsync. cudaMalloc'd scratch freed
  // within a call is not seen.
  MemoryUse memory_use() override;

 protected:
  // element: the type the implementation reads and writes (inputs are --dtype values re-encoded).
  CudaExecutorBase(const Job& job, DType element) : job_(job), element_(element) {}
  // Allocates every buffer, copies the inputs in, creates the events, resets the pool's mark.
  Status init();

  Job job_;
  DType element_;
  DeviceBuffer q_, k_, v_, dout_, out_, lse_, dq_, dk_, dv_;
  std::size_t extra_workspace_ = 0;

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t forward_end_ = nullptr;
  cudaEvent_t end_ = nullptr;
};

}  // namespace flashcore::cli
