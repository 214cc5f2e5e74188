// Which kernel set this process uses: the fastest the CPU supports, unless FLASHCORE_CPU_KERNELS
// names one ("portable" or "avx512"; an unknown or unsupported name gives the portable set).
#include <cstdlib>
#include <cstring>

#include "cpu/kernels/kernels.h"

namespace flashcore::cpu {

#if defined(FLASHCORE_CPU_AVX512)
CpuKernels avx512_kernel_table(const Bf16Kernels* bf16);  // avx512.cpp
const Bf16Kernels& avx512_bf16_kernel_table();           // avx512_bf16.cpp

const CpuKernels* avx512_kernels() {
  static const bool supported = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                                __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  // FLASHCORE_CPU_BF16=0 keeps bf16 inputs on the fp32 products (for comparisons and tests).
  static const bool bf16 = supported && __builtin_cpu_supports("avx512bf16") &&
                           !(std::getenv("FLASHCORE_CPU_BF16") != nullptr && std::strcmp(std::getenv("FLASHCORE_CPU_BF16"), "0") == 0);
  static const CpuKernels table = supported ? avx512_kernel_table(bf16 ? &avx512_bf16_kernel_table() : nullptr)
                                            : CpuKernels{};
  return supported ? &table : nullptr;
}
#else
const CpuKernels* avx512_kernels() { return nullptr; }
#endif

const CpuKernels& cpu_kernels() {
  // A pointer, not a reference bound to the lambda's result: GCC's -Wdangling-reference cannot
  // tell the returned tables are static.
  static const CpuKernels* const chosen = []() -> const CpuKernels* {
    const char* forced = std::getenv("FLASHCORE_CPU_KERNELS");
    const CpuKernels* avx512 = avx512_kernels();
    if (forced != nullptr && *forced != '\0') {
      if (std::strcmp(forced, "avx512") == 0 && avx512 != nullptr) return avx512;
      return &portable_kernels();
    }
    return avx512 != nullptr ? avx512 : &portable_kernels();
  }();
  return *chosen;
}

}  // namespace flashcore::cpu
