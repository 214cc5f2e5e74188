// `flashcore fuzz --device cuda` in a CPU-only build: a clear error.
#include "fuzz_memory.h"

namespace flashcore::cli {

Status make_cuda_memory(std::unique_ptr<FuzzMemory>*) {
  return Status::NotSupported("--device cuda: this flashcore was built without CUDA (no nvcc at configure time)");
}

}  // namespace flashcore::cli
