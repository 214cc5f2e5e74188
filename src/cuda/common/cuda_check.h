// Turning CUDA runtime errors into flashcore Status values (the library never aborts).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "flashcore/tensor.h"

namespace flashcore::cuda {

inline Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::Ok();
  return Status::CudaError(std::string(what) + ": " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

}  // namespace flashcore::cuda

// Return a CudaError Status from the enclosing function when `expr` fails.
#define FLASHCORE_CUDA_RETURN_IF_ERROR(expr)                                   \
  do {                                                                         \
    ::flashcore::Status cuda_status_ = ::flashcore::cuda::cuda_status((expr), #expr); \
    if (!cuda_status_.ok()) return cuda_status_;                               \
  } while (0)
