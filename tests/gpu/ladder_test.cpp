// GPU tests of the teaching ladder (examples/ladder): every rung against a float64 CPU reference
// written here, which shares no mask or softmax code with the rungs.
//
// Float32 rungs (naive, algo1): max |error| / max |reference| below 1e-4, forward and backward.
// The fp16 rung (wmma) follows FlashAttention's rule: its error may be at most twice that of a
// plain fp16 implementation (fp16 matmul outputs, fp32 softmax rounded to fp16) plus 2 fp16 ulp
// at the output's magnitude. Outputs are NaN-poisoned before every run and NaN never passes.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ladder.h"

namespace {

namespace fl = flashcore::ladder;

bool cuda_device_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

#define SKIP_WITHOUT_CUDA() \
  if (!cuda_device_present()) GTEST_SKIP() << "no CUDA device: the ladder's rungs run on the GPU"

// Device memory freed on scope exit; failures become test failures.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) { EXPECT_EQ(cudaMalloc(&data_, bytes), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return data_; }
  float* floats() const { return static_cast<float*>(data_); }
  void upload(const void* host) { ASSERT_EQ(cudaMemcpy(data_, host, bytes_, cudaMemcpyHostToDevice), cudaSuccess); }
  void download(void* host) const { ASSERT_EQ(cudaMemcpy(host, data_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess); }
  // All bits set: NaN in float32 and in fp16, so anything left unwritten fails the comparison.
  void poison() { ASSERT_EQ(cudaMemset(data_, 0xff, bytes_), cudaSuccess); }

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
};

struct Shape {
  int batch, heads, seqlen, head_dim;
  bool causal;
  std::size_t elements() const { return static_cast<std::size_t>(batch) * seqlen * heads * head_dim; }
  std::size_t rows() const { return static_cast<std::size_t>(batch) * heads * seqlen; }
  double scale() const { return 1.0 / std::sqrt(static_cast<double>(head_dim)); }
  fl::LadderProblem problem() const {
    return {batch, heads, seqlen, head_dim, causal, static_cast<float>(scale())};
  }
};

// Long sequences use fewer heads to keep the CPU reference quick.
Shape shape_for(int seqlen, int head_dim, bool causal) {
  return seqlen >= 512 ? Shape{1, 2, seqlen, head_dim, causal} : Shape{2, 3, seqlen, head_dim, causal};
}

std::vector<float> random_normal(std::size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = dist(rng);
  return values;
}

// Index of (b, t, h, d) in a (batch, seqlen, heads, head_dim) tensor.
std::size_t at(const Shape& s, int b, int t, int h, int d) {
  return ((static_cast<std::size_t>(b) * s.seqlen + t) * s.heads + h) * s.head_dim + d;
}

bool visible(const Shape& s, int query, int key) { return !s.causal || key <= query; }

// Softmax probabilities of one query row in float64 (hidden keys 0), and its log-sum-exp.
std::vector<double> reference_probs(const Shape& s, const std::vector<float>& q, const std::vector<float>& k, int b,
                                    int h, int i, double* lse) {
  std::vector<double> p(s.seqlen, 0.0);
  double row_max = -INFINITY;
  for (int j = 0; j < s.seqlen; ++j) {
    if (!visible(s, i, j)) continue;
    double dot = 0.0;
    for (int d = 0; d < s.head_dim; ++d) dot += static_cast<double>(q[at(s, b, i, h, d)]) * k[at(s, b, j, h, d)];
    p[j] = dot * s.scale();
    row_max = std::max(row_max, p[j]);
  }
  double sum = 0.0;
  for (int j = 0; j < s.seqlen; ++j) {
    p[j] = visible(s, i, j) ? std::exp(p[j] - row_max) : 0.0;
    sum += p[j];
  }
  for (double& x : p) x /= sum;
  *lse = row_max + std::log(sum);
  return p;
}

struct ForwardReference {
  std::vector<double> o, lse;
};

ForwardReference reference_forward(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v) {
  ForwardReference ref{std::vector<double>(s.elements(), 0.0), std::vector<double>(s.rows(), 0.0)};
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      for (int i = 0; i < s.seqlen; ++i) {
        double lse;
        const std::vector<double> p = reference_probs(s, q, k, b, h, i, &lse);
        ref.lse[(static_cast<std::size_t>(b) * s.heads + h) * s.seqlen + i] = lse;
        for (int j = 0; j < s.seqlen; ++j) {
          if (p[j] == 0.0) continue;
          for (int d = 0; d < s.head_dim; ++d) ref.o[at(s, b, i, h, d)] += p[j] * v[at(s, b, j, h, d)];
        }
      }
    }
  }
  return ref;
}

struct Gradients {
  std::vector<double> dq, dk, dv;
};

// dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(P * dP)), dQ = scale dS K, dK = scale dS^T Q.
Gradients reference_backward(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
                             const std::vector<float>& v, const std::vector<float>& dout) {
  Gradients g{std::vector<double>(s.elements(), 0.0), std::vector<double>(s.elements(), 0.0),
              std::vector<double>(s.elements(), 0.0)};
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      for (int i = 0; i < s.seqlen; ++i) {
        double lse;
        const std::vector<double> p = reference_probs(s, q, k, b, h, i, &lse);
        std::vector<double> dp(s.seqlen, 0.0);
        double row_term = 0.0;
        for (int j = 0; j < s.seqlen; ++j) {
          if (p[j] == 0.0) continue;
          for (int d = 0; d < s.head_dim; ++d) dp[j] += static_cast<double>(dout[at(s, b, i, h, d)]) * v[at(s, b, j, h, d)];
          row_term += p[j] * dp[j];
        }
        for (int j = 0; j < s.seqlen; ++j) {
          if (p[j] == 0.0) continue;
          const double ds = p[j] * (dp[j] - row_term) * s.scale();
          for (int d = 0; d < s.head_dim; ++d) {
            g.dq[at(s, b, i, h, d)] += ds * k[at(s, b, j, h, d)];
            g.dk[at(s, b, j, h, d)] += ds * q[at(s, b, i, h, d)];
            g.dv[at(s, b, j, h, d)] += p[j] * dout[at(s, b, i, h, d)];
          }
        }
      }
    }
  }
  return g;
}

// max |got - ref| / max |ref|; infinite when anything is not finite (NaN never passes).
double relative_error(const std::vector<float>& got, const std::vector<double>& ref) {
  double worst = 0.0, magnitude = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    worst = std::max(worst, std::fabs(got[i] - ref[i]));
    magnitude = std::max(magnitude, std::fabs(ref[i]));
  }
  return worst / std::max(magnitude, 1e-300);
}

double max_abs(const std::vector<float>& values) {
  double m = 0.0;
  for (float x : values) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

// A gradient whose float64 reference is exactly zero has no relative scale: dQ and dK at seqlen 1,
// where P = 1 makes dS = P (dP - D) vanish. Float32 still computes dP and D = dO . O as two dot
// products of head_dim terms, each off by at most head_dim * u * sum_k |dO_k V_k| (u = 2^-24), and
// dQ = scale dS K (dK = scale dS Q) carries that difference. At seqlen 1 a query's only key has
// its own index, hence V_i below. `operand` is K for dQ, Q for dK.
double zero_gradient_bound(const Shape& s, const std::vector<float>& dout, const std::vector<float>& v,
                           const std::vector<float>& operand) {
  double row_terms = 0.0;
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      for (int i = 0; i < s.seqlen; ++i) {
        double sum = 0.0;
        for (int d = 0; d < s.head_dim; ++d) {
          sum += std::fabs(static_cast<double>(dout[at(s, b, i, h, d)]) * v[at(s, b, i, h, d)]);
        }
        row_terms = std::max(row_terms, sum);
      }
    }
  }
  return 2.0 * s.head_dim * std::ldexp(1.0, -24) * row_terms * s.scale() * max_abs(operand);
}

// Relative error under 1e-4 or, for an all-zero reference, absolute error under `zero_bound`.
void expect_gradient_close(const std::vector<float>& got, const std::vector<double>& ref, double zero_bound,
                           const char* name) {
  const bool all_zero = std::all_of(ref.begin(), ref.end(), [](double x) { return x == 0.0; });
  if (!all_zero) {
    EXPECT_LT(relative_error(got, ref), 1e-4) << name;
    return;
  }
  double worst = 0.0;
  for (float x : got) worst = std::isfinite(x) ? std::max(worst, static_cast<double>(std::fabs(x))) : INFINITY;
  EXPECT_LE(worst, zero_bound) << name << ": the reference is exactly zero";
}

struct Case {
  std::string rung;
  int seqlen;
  int head_dim;
  bool causal;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return c.rung + "_s" + std::to_string(c.seqlen) + "_d" + std::to_string(c.head_dim) + (c.causal ? "_causal" : "_full");
}

std::vector<Case> cases_for(const std::vector<std::string>& rungs) {
  std::vector<Case> cases;
  for (const std::string& rung : rungs) {
    for (int seqlen : {1, 17, 128, 1000}) {
      for (int head_dim : {32, 64}) {
        for (bool causal : {false, true}) cases.push_back({rung, seqlen, head_dim, causal});
      }
    }
  }
  return cases;
}

// Inputs and outputs of one float32 run on the device.
struct Float32Run {
  Shape shape;
  std::vector<float> q, k, v;
  DeviceBuffer d_q, d_k, d_v, d_o, d_lse;

  Float32Run(const Shape& s, unsigned seed)
      : shape(s),
        q(random_normal(s.elements(), seed)),
        k(random_normal(s.elements(), seed + 1)),
        v(random_normal(s.elements(), seed + 2)),
        d_q(s.elements() * sizeof(float)),
        d_k(s.elements() * sizeof(float)),
        d_v(s.elements() * sizeof(float)),
        d_o(s.elements() * sizeof(float)),
        d_lse(s.rows() * sizeof(float)) {
    d_q.upload(q.data());
    d_k.upload(k.data());
    d_v.upload(v.data());
  }

  flashcore::Status forward(const fl::Rung& rung) {
    d_o.poison();
    d_lse.poison();
    const flashcore::Status status =
        rung.forward(shape.problem(), d_q.get(), d_k.get(), d_v.get(), d_o.get(), d_lse.floats(), nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return status;
  }
};

unsigned seed_for(const Case& c) { return 1000u * c.seqlen + 10u * c.head_dim + (c.causal ? 1u : 0u); }

class LadderFloat32 : public ::testing::TestWithParam<Case> {};

TEST_P(LadderFloat32, ForwardMatchesFloat64Reference) {
  SKIP_WITHOUT_CUDA();
  const Case& c = GetParam();
  const fl::Rung* rung = fl::find_rung(c.rung);
  ASSERT_NE(rung, nullptr);
  ASSERT_EQ(rung->dtype, flashcore::DType::kFloat32);
  Float32Run run(shape_for(c.seqlen, c.head_dim, c.causal), seed_for(c));
  const flashcore::Status status = run.forward(*rung);
  ASSERT_TRUE(status.ok()) << status.message();

  std::vector<float> o(run.shape.elements()), lse(run.shape.rows());
  run.d_o.download(o.data());
  run.d_lse.download(lse.data());
  const ForwardReference ref = reference_forward(run.shape, run.q, run.k, run.v);
  EXPECT_LT(relative_error(o, ref.o), 1e-4);
  EXPECT_LT(relative_error(lse, ref.lse), 1e-4);
}

TEST_P(LadderFloat32, BackwardMatchesFloat64Reference) {
  SKIP_WITHOUT_CUDA();
  const Case& c = GetParam();
  const fl::Rung* rung = fl::find_rung(c.rung);
  ASSERT_NE(rung, nullptr);
  ASSERT_NE(rung->backward, nullptr);
  Float32Run run(shape_for(c.seqlen, c.head_dim, c.causal), seed_for(c));
  flashcore::Status status = run.forward(*rung);
  ASSERT_TRUE(status.ok()) << status.message();

  const Shape& s = run.shape;
  const std::vector<float> dout = random_normal(s.elements(), seed_for(c) + 3);
  const std::size_t bytes = s.elements() * sizeof(float);
  DeviceBuffer d_dout(bytes), d_dq(bytes), d_dk(bytes), d_dv(bytes);
  d_dout.upload(dout.data());
  d_dq.poison();
  d_dk.poison();
  d_dv.poison();
  status = rung->backward(s.problem(), run.d_q.get(), run.d_k.get(), run.d_v.get(), run.d_o.get(), d_dout.get(),
                          run.d_lse.floats(), d_dq.get(), d_dk.get(), d_dv.get(), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_TRUE(status.ok()) << status.message();

  std::vector<float> dq(s.elements()), dk(s.elements()), dv(s.elements());
  d_dq.download(dq.data());
  d_dk.download(dk.data());
  d_dv.download(dv.data());
  const Gradients ref = reference_backward(s, run.q, run.k, run.v, dout);
  expect_gradient_close(dq, ref.dq, zero_gradient_bound(s, dout, run.v, run.k), "dq");
  expect_gradient_close(dk, ref.dk, zero_gradient_bound(s, dout, run.v, run.q), "dk");
  expect_gradient_close(dv, ref.dv, 0.0, "dv");
}

INSTANTIATE_TEST_SUITE_P(Rungs, LadderFloat32, ::testing::ValuesIn(cases_for({"naive", "algo1"})), case_name);

// --- The fp16 rung ------------------------------------------------------------------------------

float round_fp16(float x) { return __half2float(__float2half_rn(x)); }

// The plain same-precision implementation FlashAttention measures against: scaled queries and
// both matmul outputs rounded to fp16 (fp32 accumulation), the softmax in fp32 rounded to fp16.
std::vector<double> plain_fp16_forward(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
                                       const std::vector<float>& v) {
  std::vector<double> out(s.elements());
  const float scale = static_cast<float>(s.scale());
  std::vector<float> scores(s.seqlen), probs(s.seqlen);
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      for (int i = 0; i < s.seqlen; ++i) {
        float row_max = -INFINITY;
        for (int j = 0; j < s.seqlen; ++j) {
          if (!visible(s, i, j)) continue;
          float dot = 0.0f;
          for (int d = 0; d < s.head_dim; ++d) dot += round_fp16(q[at(s, b, i, h, d)] * scale) * k[at(s, b, j, h, d)];
          scores[j] = round_fp16(dot);
          row_max = std::max(row_max, scores[j]);
        }
        float sum = 0.0f;
        for (int j = 0; j < s.seqlen; ++j) {
          probs[j] = visible(s, i, j) ? std::exp(scores[j] - row_max) : 0.0f;
          sum += probs[j];
        }
        for (int j = 0; j < s.seqlen; ++j) probs[j] = round_fp16(probs[j] / sum);
        for (int d = 0; d < s.head_dim; ++d) {
          float acc = 0.0f;
          for (int j = 0; j < s.seqlen; ++j) acc += probs[j] * v[at(s, b, j, h, d)];
          out[at(s, b, i, h, d)] = round_fp16(acc);
        }
      }
    }
  }
  return out;
}

double max_abs_error(const std::vector<double>& got, const std::vector<double>& ref) {
  double worst = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    worst = std::max(worst, std::fabs(got[i] - ref[i]));
  }
  return worst;
}

// One fp16 unit in the last place at magnitude x (10 fraction bits).
double fp16_ulp(double x) { return std::ldexp(1.0, std::ilogb(std::max(x, 6.1e-5)) - 10); }

class LadderFloat16 : public ::testing::TestWithParam<Case> {};

TEST_P(LadderFloat16, ForwardMeetsFlashAttentionRule) {
  SKIP_WITHOUT_CUDA();
  const Case& c = GetParam();
  const fl::Rung* rung = fl::find_rung(c.rung);
  ASSERT_NE(rung, nullptr);
  ASSERT_EQ(rung->dtype, flashcore::DType::kFloat16);
  const Shape s = shape_for(c.seqlen, c.head_dim, c.causal);

  // Inputs rounded to fp16 once; the reference sees exactly what the kernel sees.
  std::vector<float> q = random_normal(s.elements(), seed_for(c));
  std::vector<float> k = random_normal(s.elements(), seed_for(c) + 1);
  std::vector<float> v = random_normal(s.elements(), seed_for(c) + 2);
  std::vector<__half> q16(s.elements()), k16(s.elements()), v16(s.elements());
  for (std::size_t i = 0; i < s.elements(); ++i) {
    q16[i] = __float2half_rn(q[i]);
    k16[i] = __float2half_rn(k[i]);
    v16[i] = __float2half_rn(v[i]);
    q[i] = __half2float(q16[i]);
    k[i] = __half2float(k16[i]);
    v[i] = __half2float(v16[i]);
  }
  const std::size_t bytes = s.elements() * sizeof(__half);
  DeviceBuffer d_q(bytes), d_k(bytes), d_v(bytes), d_o(bytes), d_lse(s.rows() * sizeof(float));
  d_q.upload(q16.data());
  d_k.upload(k16.data());
  d_v.upload(v16.data());
  d_o.poison();
  d_lse.poison();
  const flashcore::Status status =
      rung->forward(s.problem(), d_q.get(), d_k.get(), d_v.get(), d_o.get(), d_lse.floats(), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_TRUE(status.ok()) << status.message();

  std::vector<__half> o16(s.elements());
  std::vector<float> lse(s.rows());
  d_o.download(o16.data());
  d_lse.download(lse.data());
  std::vector<double> o(s.elements());
  for (std::size_t i = 0; i < o.size(); ++i) o[i] = __half2float(o16[i]);

  const ForwardReference ref = reference_forward(s, q, k, v);
  double magnitude = 0.0;
  for (double x : ref.o) magnitude = std::max(magnitude, std::fabs(x));
  const double kernel_error = max_abs_error(o, ref.o);
  const double plain_error = max_abs_error(plain_fp16_forward(s, q, k, v), ref.o);
  const double bound = 2.0 * plain_error + 2.0 * fp16_ulp(magnitude);
  EXPECT_LE(kernel_error, bound) << "plain fp16 implementation's error " << plain_error;
  // The LSE is float32 from exact fp16 products accumulated in fp32: float32-level accuracy.
  EXPECT_LT(relative_error(lse, ref.lse), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Rungs, LadderFloat16, ::testing::ValuesIn(cases_for({"wmma"})), case_name);

// --- Small runs for compute-sanitizer (scripts/device.sh sanitize runs *Sanitize*) --------------

// Algorithm 1 forward and backward on a ragged causal shape: memcheck and racecheck look at every
// code path (partial tiles, skipped tiles, atomics) in well under a second.
TEST(LadderSanitize, Algo1ForwardAndBackwardRaggedCausal) {
  SKIP_WITHOUT_CUDA();
  const fl::Rung* rung = fl::find_rung("algo1");
  ASSERT_NE(rung, nullptr);
  for (bool causal : {true, false}) {
    const Shape s{1, 2, 77, 64, causal};
    Float32Run run(s, 7);
    flashcore::Status status = run.forward(*rung);
    ASSERT_TRUE(status.ok()) << status.message();
    const std::size_t bytes = s.elements() * sizeof(float);
    DeviceBuffer d_dout(bytes), d_dq(bytes), d_dk(bytes), d_dv(bytes);
    d_dout.upload(random_normal(s.elements(), 8).data());
    status = rung->backward(s.problem(), run.d_q.get(), run.d_k.get(), run.d_v.get(), run.d_o.get(), d_dout.get(),
                            run.d_lse.floats(), d_dq.get(), d_dk.get(), d_dv.get(), nullptr);
    ASSERT_TRUE(status.ok()) << status.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
}

// The other rungs' kernels (naive's matmul and softmax, wmma's fragments), for memcheck.
TEST(LadderSanitize, NaiveAndWmmaRaggedCausal) {
  SKIP_WITHOUT_CUDA();
  const Shape s{1, 2, 77, 64, true};
  Float32Run run(s, 9);
  const fl::Rung* naive = fl::find_rung("naive");
  ASSERT_NE(naive, nullptr);
  flashcore::Status status = run.forward(*naive);
  ASSERT_TRUE(status.ok()) << status.message();
  const std::size_t bytes = s.elements() * sizeof(float);
  DeviceBuffer d_dout(bytes), d_dq(bytes), d_dk(bytes), d_dv(bytes);
  d_dout.upload(random_normal(s.elements(), 10).data());
  status = naive->backward(s.problem(), run.d_q.get(), run.d_k.get(), run.d_v.get(), run.d_o.get(), d_dout.get(),
                           run.d_lse.floats(), d_dq.get(), d_dk.get(), d_dv.get(), nullptr);
  ASSERT_TRUE(status.ok()) << status.message();

  const fl::Rung* wmma = fl::find_rung("wmma");
  ASSERT_NE(wmma, nullptr);
  const std::vector<__half> halves(s.elements(), __float2half_rn(0.5f));
  const std::size_t half_bytes = s.elements() * sizeof(__half);
  DeviceBuffer d_q16(half_bytes), d_o16(half_bytes);
  d_q16.upload(halves.data());
  status = wmma->forward(s.problem(), d_q16.get(), d_q16.get(), d_q16.get(), d_o16.get(), run.d_lse.floats(), nullptr);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// --- Bad input: a Status naming the argument, nothing launched (no device needed) ---------------

TEST(LadderArguments, UnknownRungIsNotFound) { EXPECT_EQ(fl::find_rung("no-such-rung"), nullptr); }

TEST(LadderArguments, RungsRejectBadInputByName) {
  for (const fl::Rung& rung : fl::rungs()) {
    fl::LadderProblem p;
    p.head_dim = 48;
    int dummy = 0;
    flashcore::Status status = rung.forward(p, &dummy, &dummy, &dummy, &dummy, nullptr, nullptr);
    EXPECT_EQ(status.code(), flashcore::StatusCode::kNotSupported) << rung.name;
    EXPECT_NE(status.message().find("head_dim"), std::string::npos) << status.message();

    p.head_dim = 64;
    status = rung.forward(p, nullptr, &dummy, &dummy, &dummy, nullptr, nullptr);
    EXPECT_EQ(status.code(), flashcore::StatusCode::kInvalidArgument) << rung.name;
    EXPECT_NE(status.message().find("q must not be null"), std::string::npos) << status.message();

    p.seqlen = 0;
    status = rung.forward(p, &dummy, &dummy, &dummy, &dummy, nullptr, nullptr);
    EXPECT_EQ(status.code(), flashcore::StatusCode::kInvalidArgument) << rung.name;
    EXPECT_NE(status.message().find("seqlen"), std::string::npos) << status.message();
  }
}

}  // namespace
