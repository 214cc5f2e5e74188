// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator, so any element of a random stream is computed from its index alone,
// with no state carried between draws. Dropout (attention.h, "dropout") uses it to draw the same
// keep mask in the forward and the backward, on every backend, without storing it.
//
// Host and device code: the CPU backends, the float64 reference and the CUDA kernels all call this
// one function; the tests pin it to the paper's known-answer vectors (tests/cpu/dropout_test.cpp).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FLASHCORE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FLASHCORE_HOST_DEVICE inline
#endif

namespace flashcore {

struct Philox4x32 {
  std::uint32_t x, y, z, w;
};

// The high and low 32 bits of a * b: one IMAD.WIDE on the GPU.
FLASHCORE_HOST_DEVICE void philox_mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t* hi, std::uint32_t* lo) {
#if defined(__CUDA_ARCH__)
  *hi = __umulhi(a, b);
  *lo = a * b;
#else
  const std::uint64_t product = static_cast<std::uint64_t>(a) * b;
  *hi = static_cast<std::uint32_t>(product >> 32);
  *lo = static_cast<std::uint32_t>(product);
#endif
}

// Ten rounds of Philox4x32 over `counter` with the 64-bit `key` (the Random123 constants; the
// same stream as curand's Philox4_32_10 for the same key and counter).
FLASHCORE_HOST_DEVICE Philox4x32 philox4x32_10(Philox4x32 counter, std::uint32_t key0, std::uint32_t key1) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u;
  constexpr std::uint32_t kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;
  constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
    std::uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kMul0, counter.x, &hi0, &lo0);
    philox_mulhilo(kMul1, counter.z, &hi1, &lo1);
    counter = Philox4x32{hi1 ^ counter.y ^ key0, lo1, hi0 ^ counter.w ^ key1, lo0};
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return counter;
}

}  // namespace flashcore
