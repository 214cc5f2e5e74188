// See common/device_check.h.
#include <string>

#include "cuda/common/cuda_check.h"
#include "cuda/common/device_check.h"

namespace flashcore::cuda {

Status check_device(const char* function, int* compute_capability) {
  int device = 0;
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  int major = 0, minor = 0;
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  *compute_capability = major * 10 + minor;
  if (*compute_capability < 80) {
    return Status::NotSupported(std::string(function) + ": device " + std::to_string(device) +
                                " has compute capability " + std::to_string(major) + "." + std::to_string(minor) +
                                "; flashcore's GPU kernels need 8.0 (Ampere) or newer");
  }
  return Status::Ok();
}

Status check_device_pointers(const char* function, std::initializer_list<NamedTensor> tensors) {
  int device = 0;
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  for (const NamedTensor& t : tensors) {
    if (!t.tensor->present()) continue;
    cudaPointerAttributes attributes{};
    cudaError_t error = cudaPointerGetAttributes(&attributes, t.tensor->data);
    if (error != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky-free error so later calls are unaffected
      return Status::InvalidArgument(std::string(function) + ": " + t.name + ": pointer is not CUDA memory");
    }
    const bool device_memory = attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
    if (!device_memory) {
      return Status::InvalidArgument(std::string(function) + ": " + t.name +
                                     ": is tagged Device::kCUDA but points to host memory");
    }
    if (attributes.type == cudaMemoryTypeDevice && attributes.device != device) {
      return Status::InvalidArgument(std::string(function) + ": " + t.name + ": lives on device " +
                                     std::to_string(attributes.device) + " but the current device is " +
                                     std::to_string(device));
    }
  }
  return Status::Ok();
}

}  // namespace flashcore::cuda
