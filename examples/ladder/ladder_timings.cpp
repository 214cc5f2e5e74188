// Times every rung of the ladder, forward and backward, next to flashcore's tensor-core path
// (flashcore::forward / backward on fp16 with Backend::kCuda) on one shape: the numbers each
// rung's header quotes.
//
// Usage: ladder_timings [batch heads seqlen head_dim]   (default 1 8 512 64; full and causal)
// Times are CUDA-event means over 20 runs after 3 warm-ups; the naive rung's include its
// stream-ordered scratch allocation. Exit code 1 on a CUDA or rung error, 77 without a device.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "flashcore/flashcore.h"
#include "ladder.h"

namespace {

namespace fl = flashcore::ladder;

// Device buffers of one problem, filled with N(0, 1) values in `dtype`.
struct Buffers {
  std::vector<void*> owned;
  void *q, *k, *v, *o, *dout, *dq, *dk, *dv;
  float* lse;

  Buffers(const fl::LadderProblem& p, flashcore::DType dtype) {
    const std::size_t elems = static_cast<std::size_t>(p.batch) * p.seqlen * p.heads * p.head_dim;
    const std::size_t bytes = elems * flashcore::dtype_size(dtype);
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> f32(elems);
    std::vector<__half> f16(elems);
    for (void** slot : {&q, &k, &v, &o, &dout, &dq, &dk, &dv}) {
      *slot = allocate(bytes);
      for (std::size_t i = 0; i < elems; ++i) {
        f32[i] = dist(rng);
        f16[i] = __float2half_rn(f32[i]);
      }
      const void* host = dtype == flashcore::DType::kFloat16 ? static_cast<const void*>(f16.data()) : f32.data();
      if (*slot != nullptr) cudaMemcpy(*slot, host, bytes, cudaMemcpyHostToDevice);
    }
    lse = static_cast<float*>(allocate(static_cast<std::size_t>(p.batch) * p.heads * p.seqlen * sizeof(float)));
  }
  ~Buffers() {
    for (void* ptr : owned) cudaFree(ptr);
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;

  void* allocate(std::size_t bytes) {
    void* ptr = nullptr;
    if (cudaMalloc(&ptr, bytes) != cudaSuccess) return nullptr;
    owned.push_back(ptr);
    return ptr;
  }
  bool ok() const { return owned.size() == 9; }
};

// Mean milliseconds of `run`, or a negative value after printing why it failed.
float time_ms(const std::function<flashcore::Status()>& run) {
  for (int i = 0; i < 3; ++i) {
    const flashcore::Status status = run();
    if (!status.ok()) {
      std::printf("  unavailable: %s\n", status.message().c_str());
      return -1.0f;
    }
  }
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  constexpr int kReps = 20;
  cudaEventRecord(start);
  for (int i = 0; i < kReps; ++i) run();
  cudaEventRecord(stop);
  float ms = -1.0f;
  if (cudaEventSynchronize(stop) == cudaSuccess && cudaGetLastError() == cudaSuccess) {
    cudaEventElapsedTime(&ms, start, stop);
    ms /= kReps;
  } else {
    std::printf("  CUDA error while timing\n");
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms;
}

void report(const char* name, const char* pass, float ms, double flops) {
  if (ms > 0.0f) std::printf("%-8s %-8s %9.3f ms  %8.2f TFLOP/s\n", name, pass, ms, flops / (ms * 1e9));
}

flashcore::TensorView view(void* data, flashcore::DType dtype, const fl::LadderProblem& p) {
  return flashcore::make_view(data, dtype, flashcore::Device::kCUDA, {p.batch, p.seqlen, p.heads, p.head_dim});
}

// flashcore's own CUDA kernels (fp16), the tensor-core path the ladder leads to.
void time_library(const fl::LadderProblem& p, double fwd_flops) {
  Buffers b(p, flashcore::DType::kFloat16);
  if (!b.ok()) return;
  const auto f16 = flashcore::DType::kFloat16;
  flashcore::ForwardParams fwd;
  fwd.q = view(b.q, f16, p);
  fwd.k = view(b.k, f16, p);
  fwd.v = view(b.v, f16, p);
  fwd.out = view(b.o, f16, p);
  fwd.lse = flashcore::make_view(b.lse, flashcore::DType::kFloat32, flashcore::Device::kCUDA, {p.batch, p.heads, p.seqlen});
  fwd.softmax_scale = p.softmax_scale;
  fwd.causal = p.causal;
  fwd.backend = flashcore::Backend::kCuda;
  std::printf("flashcore (fp16, tensor cores):\n");
  report("library", "forward", time_ms([&] { return flashcore::forward(fwd); }), fwd_flops);
  flashcore::BackwardParams bwd;
  bwd.q = fwd.q;
  bwd.k = fwd.k;
  bwd.v = fwd.v;
  bwd.out = fwd.out;
  bwd.lse = fwd.lse;
  bwd.dout = view(b.dout, f16, p);
  bwd.dq = view(b.dq, f16, p);
  bwd.dk = view(b.dk, f16, p);
  bwd.dv = view(b.dv, f16, p);
  bwd.softmax_scale = p.softmax_scale;
  bwd.causal = p.causal;
  bwd.backend = flashcore::Backend::kCuda;
  report("library", "backward", time_ms([&] { return flashcore::backward(bwd); }), 2.5 * fwd_flops);
}

bool time_rung(const fl::Rung& rung, const fl::LadderProblem& p, double fwd_flops) {
  Buffers b(p, rung.dtype);
  if (!b.ok()) {
    std::printf("%-8s out of device memory\n", rung.name.c_str());
    return false;
  }
  std::printf("%s (%s):\n", rung.name.c_str(), flashcore::dtype_name(rung.dtype));
  const float fwd_ms = time_ms([&] { return rung.forward(p, b.q, b.k, b.v, b.o, b.lse, nullptr); });
  report(rung.name.c_str(), "forward", fwd_ms, fwd_flops);
  if (fwd_ms < 0.0f) return false;
  if (rung.backward == nullptr) return true;
  const float bwd_ms =
      time_ms([&] { return rung.backward(p, b.q, b.k, b.v, b.o, b.dout, b.lse, b.dq, b.dk, b.dv, nullptr); });
  report(rung.name.c_str(), "backward", bwd_ms, 2.5 * fwd_flops);
  return bwd_ms > 0.0f;
}

}  // namespace

int main(int argc, char** argv) {
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    std::printf("no CUDA device: nothing to time\n");
    return 77;
  }
  fl::LadderProblem p;
  p.batch = 1;
  p.heads = 8;
  p.seqlen = 512;
  p.head_dim = 64;
  if (argc == 5) {
    p.batch = std::atoi(argv[1]);
    p.heads = std::atoi(argv[2]);
    p.seqlen = std::atoi(argv[3]);
    p.head_dim = std::atoi(argv[4]);
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: %s [batch heads seqlen head_dim]\n", argv[0]);
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  bool ok = true;
  for (bool causal : {false, true}) {
    p.causal = causal;
    p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));
    const double flops = 4.0 * p.batch * p.heads * p.seqlen * static_cast<double>(p.seqlen) * p.head_dim / (causal ? 2 : 1);
    std::printf("== %s: batch %d, heads %d, seqlen %d, head_dim %d, %s\n", prop.name, p.batch, p.heads, p.seqlen,
                p.head_dim, causal ? "causal" : "full");
    for (const fl::Rung& rung : fl::rungs()) ok = time_rung(rung, p, flops) && ok;
    time_library(p, flops);
  }
  return ok ? 0 : 1;
}
