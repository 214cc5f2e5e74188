// The C ABI's host path, step by step: what one flashcore_forward / flashcore_backward costs the
// calling thread, and what the CUDA calls inside it cost on their own (docs/tuning/binding_overhead.md).
//
//   host_path_bench LIBRARY.so [LIBRARY.so ...]
//
// Each library (a build of libflashcore_c.so) is loaded with dlopen and timed on issue #14's shape
// (B1 H8 S512 D64 fp16) and a tiny one (B1 H1 S16 D64), with descriptors, outputs and workspace
// prepared once, so a figure is the library's own host work plus the launches. The primitives
// (cudaGetDevice, cudaPointerGetAttributes, the driver entry-point lookup CuTe's make_tma_copy makes
// for every TMA descriptor, cuTensorMapEncodeTiled itself, an empty kernel launch) are timed alone.
// Host time: the median over batches of the mean per call in a batch; the GPU is kept ahead of the
// host by a spin kernel before each batch, so launches never wait for queue space.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "flashcore/c_api.h"

namespace {

constexpr int kCallsPerBatch = 200;
constexpr int kBatches = 9;

__global__ void empty_kernel() {}

// Keeps the GPU busy for about `cycles` clock cycles so the host never waits for queue space.
__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    std::fprintf(stderr, "host_path_bench: %s: %s\n", what, cudaGetErrorString(error));
    std::exit(1);
  }
}

// Median over batches of the mean host µs per call.
double host_us(const std::function<void()>& call, bool spin_first = true) {
  for (int i = 0; i < 20; ++i) call();
  check(cudaDeviceSynchronize(), "warm-up");
  std::vector<double> means;
  for (int b = 0; b < kBatches; ++b) {
    if (spin_first) spin_kernel<<<1, 1>>>(20'000'000);  // ~10 ms: longer than any batch's launches
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCallsPerBatch; ++i) call();
    const auto t1 = std::chrono::steady_clock::now();
    means.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / kCallsPerBatch);
    check(cudaDeviceSynchronize(), "batch");
  }
  std::sort(means.begin(), means.end());
  return means[means.size() / 2];
}

struct Library {
  void* handle = nullptr;
  int (*forward)(const flashcore_tensor*, const flashcore_tensor*, const flashcore_tensor*, const flashcore_tensor*,
                 const flashcore_tensor*, const flashcore_options*) = nullptr;
  int (*backward_workspace_size)(const flashcore_tensor*, const flashcore_tensor*, const flashcore_tensor*,
                                 const flashcore_tensor*, const flashcore_tensor*, const flashcore_tensor*,
                                 const flashcore_tensor*, const flashcore_tensor*, const flashcore_tensor*,
                                 const flashcore_options*, size_t*) = nullptr;
  int (*backward)(const flashcore_tensor*, const flashcore_tensor*, const flashcore_tensor*, const flashcore_tensor*,
                  const flashcore_tensor*, const flashcore_tensor*, const flashcore_tensor*, const flashcore_tensor*,
                  const flashcore_tensor*, const flashcore_options*) = nullptr;
  void (*options_init)(flashcore_options*) = nullptr;
  const char* (*last_error)() = nullptr;

  explicit Library(const char* path) {
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      std::fprintf(stderr, "host_path_bench: %s\n", dlerror());
      std::exit(1);
    }
    load(forward, "flashcore_forward");
    load(backward_workspace_size, "flashcore_backward_workspace_size");
    load(backward, "flashcore_backward");
    load(options_init, "flashcore_options_init");
    load(last_error, "flashcore_last_error");
  }
  template <class F>
  void load(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(handle, name));
    if (f == nullptr) {
      std::fprintf(stderr, "host_path_bench: %s lacks %s\n", "library", name);
      std::exit(1);
    }
  }
  void ok(int status, const char* what) const {
    if (status != 0) {
      std::fprintf(stderr, "host_path_bench: %s: %s\n", what, last_error());
      std::exit(1);
    }
  }
};

flashcore_tensor bshd(void* data, int dtype, int64_t b, int64_t s, int64_t h, int64_t d) {
  return {data, dtype, FLASHCORE_DEVICE_CUDA, 4, {b, s, h, d}, {s * h * d, h * d, d, 1}};
}

void time_library(const char* path, int64_t batch, int64_t heads, int64_t seqlen, int64_t head_dim) {
  Library lib(path);
  const size_t elems = static_cast<size_t>(batch * seqlen * heads * head_dim);
  std::vector<void*> buffers;
  auto alloc = [&](size_t bytes) {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc");
    check(cudaMemset(p, 0, bytes), "cudaMemset");
    buffers.push_back(p);
    return p;
  };
  const int f16 = FLASHCORE_DTYPE_FLOAT16;
  flashcore_tensor q = bshd(alloc(elems * 2), f16, batch, seqlen, heads, head_dim);
  flashcore_tensor k = bshd(alloc(elems * 2), f16, batch, seqlen, heads, head_dim);
  flashcore_tensor v = bshd(alloc(elems * 2), f16, batch, seqlen, heads, head_dim);
  flashcore_tensor out = bshd(alloc(elems * 2), f16, batch, seqlen, heads, head_dim);
  flashcore_tensor dout = bshd(alloc(elems * 2), f16, batch, seqlen, heads, head_dim);
  flashcore_tensor dq = bshd(alloc(elems * 2), f16, batch, seqlen, heads, head_dim);
  flashcore_tensor dk = bshd(alloc(elems * 2), f16, batch, seqlen, heads, head_dim);
  flashcore_tensor dv = bshd(alloc(elems * 2), f16, batch, seqlen, heads, head_dim);
  flashcore_tensor lse{alloc(static_cast<size_t>(batch * heads * seqlen) * 4), FLASHCORE_DTYPE_FLOAT32,
                       FLASHCORE_DEVICE_CUDA, 3, {batch, heads, seqlen, 0}, {heads * seqlen, seqlen, 1, 0}};
  flashcore_options options;
  lib.options_init(&options);
  size_t workspace_bytes = 0;
  lib.ok(lib.forward(&q, &k, &v, &out, &lse, &options), "forward");
  lib.ok(lib.backward_workspace_size(&q, &k, &v, &out, &dout, &lse, &dq, &dk, &dv, &options, &workspace_bytes),
         "backward_workspace_size");
  flashcore_options with_workspace = options;
  with_workspace.workspace = alloc(std::max<size_t>(workspace_bytes, 16));
  with_workspace.workspace_bytes = workspace_bytes;
  lib.ok(lib.backward(&q, &k, &v, &out, &dout, &lse, &dq, &dk, &dv, &with_workspace), "backward");
  check(cudaDeviceSynchronize(), "first calls");

  const double fwd = host_us([&] { lib.forward(&q, &k, &v, &out, &lse, &options); });
  const double size = host_us([&] {
    size_t bytes = 0;
    lib.backward_workspace_size(&q, &k, &v, &out, &dout, &lse, &dq, &dk, &dv, &options, &bytes);
  });
  const double bwd = host_us([&] { lib.backward(&q, &k, &v, &out, &dout, &lse, &dq, &dk, &dv, &with_workspace); });
  const double bwd_own_workspace =
      host_us([&] { lib.backward(&q, &k, &v, &out, &dout, &lse, &dq, &dk, &dv, &options); });
  std::printf("  %-58s B%lld H%lld S%lld D%lld: forward %6.2f  workspace_size %6.2f  backward %6.2f  "
              "backward (library allocates) %6.2f us\n",
              path, static_cast<long long>(batch), static_cast<long long>(heads), static_cast<long long>(seqlen),
              static_cast<long long>(head_dim), fwd, size, bwd, bwd_own_workspace);
  for (void* p : buffers) check(cudaFree(p), "cudaFree");
}

void time_primitives() {
  void* device_ptr = nullptr;
  check(cudaMalloc(&device_ptr, 1 << 20), "cudaMalloc");
  std::vector<char> host(1 << 20);
  int ordinal = 0;
  cudaPointerAttributes attributes{};
  const double get_device = host_us([&] { (void)cudaGetDevice(&ordinal); }, false);
  const double pointer_device = host_us([&] { (void)cudaPointerGetAttributes(&attributes, device_ptr); }, false);
  const double pointer_host = host_us([&] { (void)cudaPointerGetAttributes(&attributes, host.data()); }, false);
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found{};
  // What cutlass::call_cuTensorMapEncodeTiled does before each encode unless told otherwise.
  const auto find = [&] {
#if __CUDACC_VER_MAJOR__ > 12
    return cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault, &found);
#else
    return cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &entry, cudaEnableDefault, &found);
#endif
  };
  const double lookup = host_us([&] { (void)find(); }, false);
  check(find(), "cudaGetDriverEntryPoint(cuTensorMapEncodeTiled)");
  const auto encode_tiled = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry);
  // Q's descriptor as the sm90 forward builds it: (seqlen, head_dim, heads, batch), a 128 x 64 box.
  CUtensorMap map;
  const cuuint64_t dims[4] = {64, 512, 8, 1};
  const cuuint64_t strides[3] = {8 * 64 * 2, 64 * 2, 512 * 8 * 64 * 2};
  const cuuint32_t box[4] = {64, 128, 1, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const double encode = host_us([&] {
    (void)encode_tiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, device_ptr, dims, strides, box, element_strides,
                       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  }, false);
  const double launch = host_us([&] { empty_kernel<<<1, 32>>>(); });
  std::printf("  cudaGetDevice %.3f  cudaPointerGetAttributes (device %.3f, host %.3f)  "
              "driver entry-point lookup (cuTensorMapEncodeTiled) %.3f  cuTensorMapEncodeTiled %.3f  "
              "empty kernel launch %.3f us\n",
              get_device, pointer_device, pointer_host, lookup, encode, launch);
  check(cudaFree(device_ptr), "cudaFree");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: host_path_bench LIBRARY.so [LIBRARY.so ...]\n");
    return 2;
  }
  check(cudaFree(nullptr), "CUDA initialisation");
  std::printf("host_path_bench: host microseconds per call, median of %d batches of %d calls\n", kBatches,
              kCallsPerBatch);
  time_primitives();
  for (int i = 1; i < argc; ++i) {
    time_library(argv[i], 1, 8, 512, 64);
    time_library(argv[i], 1, 1, 16, 64);
  }
  return 0;
}
