// See device.h.
#include "cuda/device.h"

#include <cstdint>
#include <mutex>
#include <string>

#include "cuda/common/cuda_check.h"

namespace flashcore::cuda {
namespace {

constexpr int kMaxDevices = 64;

Status read_device_info(int ordinal, DeviceInfo* info) {
  int major = 0, minor = 0;
  info->ordinal = ordinal;
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ordinal));
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ordinal));
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&info->sm_count, cudaDevAttrMultiProcessorCount, ordinal));
  FLASHCORE_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&info->max_smem_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, ordinal));
  info->compute_capability = major * 10 + minor;
  return Status::Ok();
}

}  // namespace

Status current_device(const char* function, DeviceInfo* info) {
  // Facts never change while a process runs, so each device is asked once; later calls cost
  // cudaGetDevice and a lookup.
  static std::once_flag read_once[kMaxDevices];
  static DeviceInfo cached[kMaxDevices];
  static Status read_status[kMaxDevices];
  int ordinal = 0;
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&ordinal));
  if (ordinal < 0 || ordinal >= kMaxDevices) {
    return Status::NotSupported(std::string(function) + ": device " + std::to_string(ordinal) +
                                ": flashcore supports device ordinals below " + std::to_string(kMaxDevices));
  }
  std::call_once(read_once[ordinal], [&] { read_status[ordinal] = read_device_info(ordinal, &cached[ordinal]); });
  if (!read_status[ordinal].ok()) return read_status[ordinal];
  *info = cached[ordinal];
  if (info->compute_capability < 80) {
    return Status::NotSupported(std::string(function) + ": device " + std::to_string(ordinal) +
                                " has compute capability " + std::to_string(info->compute_capability / 10) + "." +
                                std::to_string(info->compute_capability % 10) +
                                "; flashcore's GPU kernels need 8.0 (Ampere) or newer");
  }
  return Status::Ok();
}

Status check_device_pointers(const char* function, const DeviceInfo& device,
                             std::initializer_list<NamedTensor> tensors) {
  for (const NamedTensor& t : tensors) {
    if (!t.tensor->present()) continue;
    cudaPointerAttributes attributes{};
    cudaError_t error = cudaPointerGetAttributes(&attributes, t.tensor->data);
    if (error != cudaSuccess) {
      (void)cudaGetLastError();  // clear the error so later calls are unaffected
      return Status::InvalidArgument(std::string(function) + ": " + t.name + ": pointer is not CUDA memory");
    }
    const bool device_memory = attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
    if (!device_memory) {
      return Status::InvalidArgument(std::string(function) + ": " + t.name +
                                     ": is tagged Device::kCUDA but points to host memory");
    }
    if (attributes.type == cudaMemoryTypeDevice && attributes.device != device.ordinal) {
      return Status::InvalidArgument(std::string(function) + ": " + t.name + ": lives on device " +
                                     std::to_string(attributes.device) + " but the current device is " +
                                     std::to_string(device.ordinal));
    }
  }
  return Status::Ok();
}

bool rows_aligned(const TensorView& t) {
  const std::int64_t elems = 16 / static_cast<std::int64_t>(dtype_size(t.dtype));
  return reinterpret_cast<std::uintptr_t>(t.data) % 16 == 0 && t.stride[0] % elems == 0 && t.stride[1] % elems == 0 &&
         t.stride[2] % elems == 0;
}

}  // namespace flashcore::cuda
