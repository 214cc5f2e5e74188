// Rung 1a, runnable: checks matmul_naive and matmul_tiled against a CPU loop on ragged shapes
// (every transpose case the attention rungs use), then times both with CUDA events.
//
// Usage: ladder_rung1_matmul [size]   (timed shape size x size x size, default 1024)
// Exit code: 0 when every check passes, 1 on a mismatch or CUDA error, 77 without a CUDA device.
//
// Measured on H100: naive 0.420 ms (5.1 TFLOP/s), tiled 0.311 ms (6.9 TFLOP/s) at 1024^3, float32
// on CUDA cores (no tensor-core GEMM in this rung).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "rung1_harness.h"
#include "rung1_matmul.cuh"

namespace fl = flashcore::ladder;

namespace {

struct Shape {
  int M, N, K;
  bool trans_a, trans_b;
};

// Stored (rows, cols) of op(X) of size rows x cols: X itself is cols x rows when transposed.
int stored_cols(int rows, int cols, bool transposed) { return transposed ? rows : cols; }

// Largest |C - ref| / sum_k |a b| over the matrix: a rounding-error bound independent of sign
// cancellation.
double cpu_check(const Shape& s, const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c) {
  const int lda = stored_cols(s.M, s.K, s.trans_a), ldb = stored_cols(s.K, s.N, s.trans_b);
  double worst = 0.0;
  for (int i = 0; i < s.M; ++i) {
    for (int j = 0; j < s.N; ++j) {
      double ref = 0.0, magnitude = 0.0;
      for (int k = 0; k < s.K; ++k) {
        const double x = s.trans_a ? a[static_cast<size_t>(k) * lda + i] : a[static_cast<size_t>(i) * lda + k];
        const double y = s.trans_b ? b[static_cast<size_t>(j) * ldb + k] : b[static_cast<size_t>(k) * ldb + j];
        ref += x * y;
        magnitude += std::fabs(x * y);
      }
      const double got = c[static_cast<size_t>(i) * s.N + j];
      const double err = std::isfinite(got) ? std::fabs(got - ref) / (magnitude + 1e-30) : INFINITY;
      if (err > worst) worst = err;
    }
  }
  return worst;
}

template <bool kTransA, bool kTransB>
void launch(bool tiled, const Shape& s, const float* a, const float* b, float* c) {
  const int lda = stored_cols(s.M, s.K, kTransA), ldb = stored_cols(s.K, s.N, kTransB);
  const auto ma = fl::single_matrix<const float>(a, lda), mb = fl::single_matrix<const float>(b, ldb);
  const auto mc = fl::single_matrix<float>(c, s.N);
  if (tiled) {
    fl::launch_matmul_tiled<kTransA, kTransB>(s.M, s.N, s.K, 1.0f, ma, mb, mc, 1, 1, nullptr);
  } else {
    fl::launch_matmul_naive<kTransA, kTransB>(s.M, s.N, s.K, 1.0f, ma, mb, mc, 1, 1, nullptr);
  }
}

void launch_any(bool tiled, const Shape& s, const float* a, const float* b, float* c) {
  if (s.trans_a) {
    launch<true, false>(tiled, s, a, b, c);
  } else if (s.trans_b) {
    launch<false, true>(tiled, s, a, b, c);
  } else {
    launch<false, false>(tiled, s, a, b, c);
  }
}

// Runs one kernel on one shape, checks it, and returns its time (negative on failure).
float run_case(bool tiled, const Shape& s, bool time_it) {
  const auto a = fl::random_floats(static_cast<size_t>(s.M) * s.K, 1, -1.0f, 1.0f);
  const auto b = fl::random_floats(static_cast<size_t>(s.K) * s.N, 2, -1.0f, 1.0f);
  fl::DeviceFloats da(a.size()), db(b.size()), dc(static_cast<size_t>(s.M) * s.N);
  if (!da.ok() || !db.ok() || !dc.ok() || !da.upload(a) || !db.upload(b)) return -1.0f;
  // NaN poison: an element the kernel forgets to write fails the check.
  if (!fl::cuda_ok(cudaMemset(dc.get(), 0xff, static_cast<size_t>(s.M) * s.N * sizeof(float)), "poison")) return -1.0f;
  launch_any(tiled, s, da.get(), db.get(), dc.get());
  std::vector<float> c;
  if (!fl::cuda_ok(cudaGetLastError(), "launch") || !dc.download(c)) return -1.0f;
  const double err = cpu_check(s, a, b, c);
  const char* name = tiled ? "matmul_tiled" : "matmul_naive";
  const bool pass = err < 1e-5;
  std::printf("%-13s M=%-5d N=%-5d K=%-5d op(A)=%s op(B)=%s  max err / sum|ab| = %.2e  %s\n", name, s.M, s.N, s.K,
              s.trans_a ? "A^T" : "A", s.trans_b ? "B^T" : "B", err, pass ? "ok" : "MISMATCH");
  if (!pass) return -1.0f;
  if (!time_it) return 0.0f;
  const float ms = fl::time_ms([&] { launch_any(tiled, s, da.get(), db.get(), dc.get()); });
  if (ms > 0.0f) {
    std::printf("%-13s %.3f ms  %.1f GFLOP/s\n", name, ms, 2.0 * s.M * s.N * s.K / (ms * 1e6));
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    std::printf("no CUDA device: nothing to run\n");
    return 77;
  }
  const int size = argc > 1 ? std::atoi(argv[1]) : 1024;
  if (size < 1) {
    std::fprintf(stderr, "size must be a positive integer, got '%s'\n", argv[1]);
    return 1;
  }
  // Ragged shapes (no multiple of the tile) in the three transpose cases attention needs:
  // S = Q K^T (B^T), O = P V (none), dV = P^T dO (A^T).
  const Shape checks[] = {{1000, 777, 513, false, false}, {333, 1000, 64, false, true}, {64, 500, 1000, true, false}};
  bool ok = true;
  for (bool tiled : {false, true}) {
    for (const Shape& s : checks) ok = run_case(tiled, s, false) >= 0.0f && ok;
  }
  const Shape timed = {size, size, size, false, false};
  for (bool tiled : {false, true}) ok = run_case(tiled, timed, true) > 0.0f && ok;
  std::printf(ok ? "all checks passed\n" : "FAILED\n");
  return ok ? 0 : 1;
}
