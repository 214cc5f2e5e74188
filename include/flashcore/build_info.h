// What a build of flashcore holds, for callers and tools that report it (`flashcore --version`,
// Python's flashcore.build_info()) or choose a backend up front.
#pragma once

namespace flashcore {

struct BuildInfo {
  const char* version;             // the library's version, e.g. "0.1.0"
  bool with_cuda;                  // the CUDA backend is compiled in (it still needs a GPU, compute capability >= 8.0)
  const char* kernel_families;     // GPU kernel families compiled in, space-separated ("sm80 sm90"); "" without CUDA
  const char* cuda_architectures;  // per family, the GPU code it holds: "sm80: sm_80 sm_90; sm90: sm_90a"
                                   // (sm_XX: machine code for that compute capability, compute_XX: PTX)
  const char* cuda_version;        // the CUDA toolkit that built it, e.g. "13.0.88"; "" without CUDA
  bool cuda_runtime_static;        // the CUDA runtime is linked in (no libcudart.so needed, only the driver)
};

BuildInfo build_info();

}  // namespace flashcore
