// Calls flashcore::forward() on CPU tensors of fp16 (flashcore::Float16) and checks the answer: with
// every value row equal to 0.5, each output element is 0.5 whatever the softmax weights are.
#include <cmath>
#include <cstdio>
#include <vector>

#include <flashcore/flashcore.h>

int main() {
  const std::int64_t batch = 1, seqlen = 128, heads = 4, head_dim = 64, n = batch * seqlen * heads * head_dim;
  std::vector<flashcore::Float16> q(n), k(n), v(n, flashcore::to_float16(0.5f)), out(n);
  for (std::int64_t i = 0; i < n; ++i) {
    q[i] = flashcore::to_float16(std::sin(0.37f * i));
    k[i] = flashcore::to_float16(std::cos(0.11f * i));
  }
  const auto dtype = flashcore::dtype_of<flashcore::Float16>();
  flashcore::ForwardParams params;
  params.q = flashcore::make_view(q.data(), dtype, flashcore::Device::kCPU, {batch, seqlen, heads, head_dim});
  params.k = flashcore::make_view(k.data(), dtype, flashcore::Device::kCPU, {batch, seqlen, heads, head_dim});
  params.v = flashcore::make_view(v.data(), dtype, flashcore::Device::kCPU, {batch, seqlen, heads, head_dim});
  params.out = flashcore::make_view(out.data(), dtype, flashcore::Device::kCPU, {batch, seqlen, heads, head_dim});
  params.causal = true;
  const flashcore::Status status = flashcore::forward(params);
  if (!status.ok()) {
    std::fprintf(stderr, "forward failed: %s\n", status.message().c_str());
    return 1;
  }
  float worst = 0.0f;
  for (const flashcore::Float16& x : out) worst = std::fmax(worst, std::fabs(flashcore::to_float(x) - 0.5f));
  const flashcore::BuildInfo info = flashcore::build_info();
  std::printf("flashcore %s (GPU kernel families: %s): causal forward on the CPU, max |out - 0.5| = %g\n",
              info.version, info.with_cuda ? info.kernel_families : "none", worst);
  return worst <= 1e-3f ? 0 : 1;
}
