// What the rung-1 programs share: a device buffer, CUDA error reporting, and CUDA-event timing.
// Errors print one line and make the caller return a non-zero exit code (no exit() deep inside).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <random>
#include <vector>

namespace flashcore::ladder {

inline bool cuda_ok(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return true;
  std::fprintf(stderr, "CUDA error in %s: %s\n", what, cudaGetErrorString(error));
  return false;
}

// Device memory for `count` floats, freed on scope exit.
class DeviceFloats {
 public:
  explicit DeviceFloats(std::size_t count) : count_(count) {
    if (cudaMalloc(&data_, count * sizeof(float)) != cudaSuccess) data_ = nullptr;
  }
  ~DeviceFloats() { cudaFree(data_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;

  float* get() const { return data_; }
  bool ok() const { return data_ != nullptr; }
  bool upload(const std::vector<float>& host) {
    return cuda_ok(cudaMemcpy(data_, host.data(), count_ * sizeof(float), cudaMemcpyHostToDevice), "upload");
  }
  bool download(std::vector<float>& host) const {
    host.resize(count_);
    return cuda_ok(cudaMemcpy(host.data(), data_, count_ * sizeof(float), cudaMemcpyDeviceToHost), "download");
  }

 private:
  float* data_ = nullptr;
  std::size_t count_;
};

inline std::vector<float> random_floats(std::size_t count, unsigned seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(count);
  for (float& v : values) v = dist(rng);
  return values;
}

// Mean time of `launch` over `reps` runs after `warmup` runs, in milliseconds (negative on error).
template <class Launch>
float time_ms(Launch&& launch, int warmup = 3, int reps = 20) {
  for (int i = 0; i < warmup; ++i) launch();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  for (int i = 0; i < reps; ++i) launch();
  cudaEventRecord(stop);
  float ms = -1.0f;
  if (cuda_ok(cudaEventSynchronize(stop), "timing") && cuda_ok(cudaGetLastError(), "timed kernel")) {
    cudaEventElapsedTime(&ms, start, stop);
    ms /= reps;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms;
}

}  // namespace flashcore::ladder
