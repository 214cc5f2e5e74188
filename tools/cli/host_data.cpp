// Seeded inputs and dtype conversions through CUTLASS's host-side half_t / bfloat16_t.
#include "host_data.h"

#include <cmath>
#include <cstring>
#include <random>

#include <cutlass/numeric_types.h>

namespace flashcore::cli {
namespace {

template <typename Element>
void encode_as(const std::vector<double>& values, std::byte* out) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    const Element e = static_cast<Element>(static_cast<float>(values[i]));
    std::memcpy(out + i * sizeof(Element), &e, sizeof(Element));
  }
}

template <typename Element>
void decode_as(const void* data, std::int64_t count, std::vector<double>* out) {
  const auto* bytes = static_cast<const std::byte*>(data);
  for (std::int64_t i = 0; i < count; ++i) {
    Element e;
    std::memcpy(&e, bytes + i * sizeof(Element), sizeof(Element));
    (*out)[i] = static_cast<double>(static_cast<float>(e));
  }
}

// Normal samples rounded to `dtype`; each tensor gets its own stream so adding dout for a backward
// run leaves q, k and v unchanged.
std::vector<double> random_tensor(std::int64_t count, DType dtype, std::uint64_t seed, std::uint64_t stream) {
  std::mt19937_64 engine(seed * 0x9E3779B97F4A7C15ull + stream);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<double> values(static_cast<std::size_t>(count));
  for (double& x : values) x = normal(engine);
  return decode(encode(values, dtype).data(), dtype, count);
}

}  // namespace

float softmax_scale(const Shape& shape) { return 1.0f / std::sqrt(static_cast<float>(shape.head_dim)); }

HostInputs make_inputs(const Shape& shape, DType dtype, bool backward, std::uint64_t seed) {
  HostInputs in;
  in.q = random_tensor(shape.q_elements(), dtype, seed, 1);
  in.k = random_tensor(shape.kv_elements(), dtype, seed, 2);
  in.v = random_tensor(shape.kv_elements(), dtype, seed, 3);
  if (backward) in.dout = random_tensor(shape.q_elements(), dtype, seed, 4);
  if (shape.alibi) {
    std::mt19937_64 rng(seed ^ 0xa11b1u);
    std::uniform_real_distribution<float> uniform(0.0f, 0.3f);
    in.alibi_slopes.resize(static_cast<std::size_t>(shape.batch * shape.heads_q));
    for (double& slope : in.alibi_slopes) slope = uniform(rng);
  }
  return in;
}

std::vector<std::byte> encode(const std::vector<double>& values, DType dtype) {
  std::vector<std::byte> bytes(values.size() * dtype_size(dtype));
  switch (dtype) {
    case DType::kFloat16: encode_as<cutlass::half_t>(values, bytes.data()); break;
    case DType::kBFloat16: encode_as<cutlass::bfloat16_t>(values, bytes.data()); break;
    case DType::kFloat32: encode_as<float>(values, bytes.data()); break;
    case DType::kInt32: encode_as<std::int32_t>(values, bytes.data()); break;
  }
  return bytes;
}

std::vector<double> decode(const void* data, DType dtype, std::int64_t count) {
  std::vector<double> values(static_cast<std::size_t>(count));
  switch (dtype) {
    case DType::kFloat16: decode_as<cutlass::half_t>(data, count, &values); break;
    case DType::kBFloat16: decode_as<cutlass::bfloat16_t>(data, count, &values); break;
    case DType::kFloat32: decode_as<float>(data, count, &values); break;
    case DType::kInt32: decode_as<std::int32_t>(data, count, &values); break;
  }
  return values;
}

}  // namespace flashcore::cli
