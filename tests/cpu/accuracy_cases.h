// The shapes the CPU flash backend is checked on, forward and backward, each in fp16 and bf16.
// Ragged sizes on purpose (1, 2, 17, 127, 1000 are not multiples of the 64-row tiles), Sq != Sk
// both ways, causal rows that see no key, GQA 8:1 and MQA, head dims 32 to 256, strided layouts.
// Sizes are kept small enough for the whole suite to run in about a minute on two cores.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "common/attention_tensors.h"

namespace flashcore {
inline void PrintTo(DType dtype, std::ostream* os) { *os << dtype_name(dtype); }
}  // namespace flashcore

namespace flashcore::testing {

struct AccuracyCase {
  const char* name;
  AttentionShape shape;  // batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal
  Layout layout;
  std::optional<float> softmax_scale = std::nullopt;  // unset: 1/sqrt(head_dim)
};

inline const std::vector<AccuracyCase>& accuracy_cases() {
  static const std::vector<AccuracyCase> cases = {
      {"seqlen1", {2, 1, 1, 4, 4, 64, false}, Layout::kContiguous},
      {"seqlen1_causal", {1, 1, 1, 2, 2, 32, true}, Layout::kPadded},
      {"seqlen2_packed", {1, 2, 2, 2, 2, 32, false}, Layout::kPackedQkv},
      {"seqlen17_causal_d40", {2, 17, 17, 3, 3, 40, true}, Layout::kPadded},
      {"seqlen127_d96", {1, 127, 127, 2, 2, 96, false}, Layout::kContiguous},
      {"seqlen77_odd_d33", {1, 77, 77, 2, 2, 33, false}, Layout::kPadded},
      {"seqlen127_causal_packed_d128", {1, 127, 127, 2, 2, 128, true}, Layout::kPackedQkv},
      {"seqlen1000", {1, 1000, 1000, 2, 2, 64, false}, Layout::kContiguous},
      {"seqlen1000_causal_d128", {1, 1000, 1000, 1, 1, 128, true}, Layout::kPadded},
      {"q_shorter_causal", {1, 17, 127, 4, 2, 64, true}, Layout::kContiguous},
      {"q_shorter", {1, 2, 1000, 2, 1, 96, false}, Layout::kPadded},
      {"q_longer", {2, 300, 45, 2, 1, 32, false}, Layout::kContiguous},
      {"q_longer_causal_empty_rows", {1, 127, 17, 2, 2, 64, true}, Layout::kPadded},
      {"q_longer_causal_1000", {1, 1000, 333, 2, 2, 32, true}, Layout::kContiguous},
      {"gqa_8to1_causal", {1, 65, 65, 16, 2, 32, true}, Layout::kPadded},
      {"mqa", {2, 33, 47, 4, 1, 64, false}, Layout::kContiguous},
      {"mqa_causal_d40", {1, 130, 77, 3, 1, 40, true}, Layout::kContiguous},
      {"d256_causal", {1, 70, 70, 2, 2, 256, true}, Layout::kContiguous},
      {"d256_ragged", {1, 130, 200, 2, 1, 256, false}, Layout::kPadded},
      {"scale0p3_causal", {2, 77, 77, 2, 2, 64, true}, Layout::kContiguous, 0.3f},
      {"scale_2_peaky", {1, 150, 150, 2, 2, 32, false}, Layout::kContiguous, 2.0f},
  };
  return cases;
}

// gtest prints parameters in failure messages; without this it dumps the struct's bytes.
inline void PrintTo(const AccuracyCase& c, std::ostream* os) {
  *os << c.name << " (" << shape_name(c.shape) << ", " << layout_name(c.layout);
  if (c.softmax_scale) *os << ", softmax_scale " << *c.softmax_scale;
  *os << ")";
}

using AccuracyParam = std::tuple<AccuracyCase, DType>;

inline std::string accuracy_param_name(const ::testing::TestParamInfo<AccuracyParam>& info) {
  const DType dtype = std::get<1>(info.param);
  return std::string(std::get<0>(info.param).name) + "_" +
         (dtype == DType::kFloat16 ? "fp16" : dtype == DType::kBFloat16 ? "bf16" : "fp32");
}

inline auto accuracy_params() {
  return ::testing::Combine(::testing::ValuesIn(accuracy_cases()),
                            ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32));
}

// A seed fixed per case, so a failure reproduces.
inline std::uint64_t case_seed(const AccuracyParam& param) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the case name
  for (const char* c = std::get<0>(param).name; *c; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
  return h + static_cast<std::uint64_t>(std::get<1>(param));
}

// Whether query row i sees no key at all (causal with seqlen_q > seqlen_k, bottom-right aligned).
inline bool row_sees_no_key(const AttentionShape& s, std::int64_t i) {
  return s.causal && i + s.seqlen_k - s.seqlen_q < 0;
}

}  // namespace flashcore::testing
