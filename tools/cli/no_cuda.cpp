// The CUDA entry points of a CPU-only build: no device, and a clear error if one is asked for.
#include "runner.h"

namespace flashcore::cli {

bool cuda_device_present() { return false; }
std::string cuda_device_name() { return "none"; }

Status make_cuda_executor(const Job&, std::unique_ptr<Executor>*) {
  return Status::NotSupported("--device cuda: this flashcore was built without CUDA (no nvcc at configure time)");
}

}  // namespace flashcore::cli
