// Where `flashcore fuzz` puts a problem's tensors: host memory for the CPU backend, device memory
// for CUDA. The fuzzer builds every tensor on the host (values, padding poisoned with NaN) and
// moves whole storage buffers, so the same code checks both devices.
#pragma once

#include <cstddef>
#include <memory>

#include "flashcore/tensor.h"

namespace flashcore::cli {

// One storage buffer on the device, freed with the object.
class DeviceStorage {
 public:
  virtual ~DeviceStorage() = default;
  virtual void* data() = 0;
  virtual Status upload(const void* host, std::size_t bytes) = 0;
  virtual Status download(void* host, std::size_t bytes) = 0;
};

class FuzzMemory {
 public:
  virtual ~FuzzMemory() = default;
  virtual Device device() const = 0;
  virtual Status allocate(std::size_t bytes, std::unique_ptr<DeviceStorage>* storage) = 0;
  // Waits for the work issued so far (the library's CUDA calls are asynchronous).
  virtual Status synchronize() = 0;
};

std::unique_ptr<FuzzMemory> make_host_memory();
// Fails with NotSupported when this build has no CUDA.
Status make_cuda_memory(std::unique_ptr<FuzzMemory>* memory);

}  // namespace flashcore::cli
