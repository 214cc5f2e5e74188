// forward_kvcache on the CPU: the flash backend against the float64 reference (rotary in float64)
// for contiguous and paged caches (page sizes 1, 16, 64, 256), cache_batch_idx, left padding,
// causal with seqlen_q > 1, window, softcap, ALiBi and GQA; the cache after the append; and the
// validation: bad block tables and lengths get an error naming the argument and write nothing.
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "common/kvcache_case.h"
#include "flashcore/kvcache.h"

namespace flashcore::testing {
namespace {

using KvParam = std::tuple<KvCacheCase, DType>;

std::string param_name(const ::testing::TestParamInfo<KvParam>& info) {
  return std::string(std::get<0>(info.param).name) + (std::get<1>(info.param) == DType::kFloat16 ? "_fp16" : "_bf16");
}

std::uint64_t seed_of(const KvParam& p) {
  std::uint64_t h = 1469598103934665603ull;
  for (const char* c = std::get<0>(p).name; *c; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
  return h + static_cast<std::uint64_t>(std::get<1>(p));
}

class CpuKvCache : public ::testing::TestWithParam<KvParam> {};

TEST_P(CpuKvCache, MatchesReferenceAndAppends) {
  KvCacheTensors t(std::get<0>(GetParam()), std::get<1>(GetParam()), seed_of(GetParam()));
  const Status status = forward_kvcache(t.host_params(Backend::kCpu));
  ASSERT_TRUE(status.ok()) << status.message();
  const std::string failures = check_kvcache_results(t);
  EXPECT_TRUE(failures.empty()) << failures;
}

TEST_P(CpuKvCache, ReferenceBackendMatchesReference) {
  KvCacheTensors t(std::get<0>(GetParam()), std::get<1>(GetParam()), seed_of(GetParam()));
  const Status status = forward_kvcache(t.host_params(Backend::kCpuReference));
  ASSERT_TRUE(status.ok()) << status.message();
  const std::string failures = check_kvcache_results(t);
  EXPECT_TRUE(failures.empty()) << failures;
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuKvCache,
                         ::testing::Combine(::testing::ValuesIn(kvcache_cases()),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16)),
                         param_name);

// ---- validation: a clear error naming the argument, nothing written ----

KvCacheCase small_paged() {
  KvCacheCase c{"small_paged", 2, 1, 4, 2, 32, 64, 16, 1, 1};
  return c;
}

// Runs `params` (after `mutate`) expecting an InvalidArgument naming `argument`; the caches and
// out must be untouched.
void expect_rejected(KvCacheTensors& t, KvCacheParams params, const std::string& argument) {
  const Status status = forward_kvcache(params);
  ASSERT_EQ(status.code(), StatusCode::kInvalidArgument) << status.message();
  EXPECT_NE(status.message().find(argument), std::string::npos) << status.message();
  EXPECT_EQ(t.k_cache.values(), t.k_cache_before.values());
  EXPECT_EQ(t.v_cache.values(), t.v_cache_before.values());
  EXPECT_TRUE(t.out.all_poisoned());
}

TEST(CpuKvCacheValidation, PageIdOutOfRange) {
  KvCacheTensors t(small_paged(), DType::kBFloat16, 1);
  t.block_table[1] = static_cast<std::int32_t>(t.k_cache.shape()[0]);  // one past the last page
  t.cache_seqlens[0] = 40;                                              // so that page 1 of sequence 0 is used
  expect_rejected(t, t.host_params(Backend::kCpu), "block_table");
  t.block_table[1] = -1;
  expect_rejected(t, t.host_params(Backend::kCpu), "block_table");
}

TEST(CpuKvCacheValidation, UnusedPagesAreNotChecked) {
  KvCacheTensors t(small_paged(), DType::kBFloat16, 2);
  t.cache_seqlens = {3, 3};  // one page each: the rest of the table may hold anything
  t.block_table[3] = -7;
  EXPECT_TRUE(forward_kvcache(t.host_params(Backend::kCpu)).ok());
}

TEST(CpuKvCacheValidation, LengthsBeyondTheCache) {
  KvCacheTensors t(small_paged(), DType::kFloat16, 3);
  t.cache_seqlens[1] = 64;  // + 1 new token > 64 positions
  expect_rejected(t, t.host_params(Backend::kCpu), "cache_seqlens");
  t.cache_seqlens[1] = -1;
  expect_rejected(t, t.host_params(Backend::kCpu), "cache_seqlens");
}

TEST(CpuKvCacheValidation, LeftpadBeyondSeqlen) {
  KvCacheTensors t(small_paged(), DType::kFloat16, 4);
  t.cache_seqlens = {10, 10};
  t.cache_leftpad = {0, 11};
  expect_rejected(t, t.host_params(Backend::kCpu), "cache_leftpad");
}

TEST(CpuKvCacheValidation, BatchIdx) {
  KvCacheCase c{"batch_idx", 3, 1, 4, 2, 32, 40, 0, 1};
  c.batch_idx = true;
  KvCacheTensors t(c, DType::kFloat16, 5);
  t.cache_batch_idx[2] = t.cache_batch_idx[0];
  expect_rejected(t, t.host_params(Backend::kCpu), "cache_batch_idx");
  t.cache_batch_idx[2] = 5;  // 5 rows: 0..4
  expect_rejected(t, t.host_params(Backend::kCpu), "cache_batch_idx");
}

TEST(CpuKvCacheValidation, RotaryTableTooShortOrWithoutNewKeys) {
  KvCacheTensors t(small_paged(), DType::kFloat16, 6);
  KvCacheParams params = t.host_params(Backend::kCpu);
  params.rotary_cos.shape[0] = params.rotary_sin.shape[0] = 8;
  t.cache_seqlens = {3, 30};
  params = t.host_params(Backend::kCpu);
  params.rotary_cos.shape[0] = params.rotary_sin.shape[0] = 8;
  expect_rejected(t, params, "rotary_cos");
  params = t.host_params(Backend::kCpu);
  params.k_new = params.v_new = TensorView{};
  expect_rejected(t, params, "rotary_cos");
}

TEST(CpuKvCacheValidation, ShapesAndDtypes) {
  KvCacheTensors t(small_paged(), DType::kFloat16, 7);
  KvCacheParams params = t.host_params(Backend::kCpu);
  params.block_table.dtype = DType::kFloat32;
  expect_rejected(t, params, "block_table");
  params = t.host_params(Backend::kCpu);
  params.cache_seqlens.shape[0] = 3;
  expect_rejected(t, params, "cache_seqlens");
  params = t.host_params(Backend::kCpu);
  params.v_new = TensorView{};
  expect_rejected(t, params, "v_new");
  params = t.host_params(Backend::kCpu);
  params.num_splits = -1;
  expect_rejected(t, params, "num_splits");
  params = t.host_params(Backend::kCpu);
  params.window_left = -2;
  expect_rejected(t, params, "window_left");
  params = t.host_params(Backend::kCpu);
  std::vector<std::int32_t> idx = {0, 1};
  params.cache_batch_idx = make_view(idx.data(), DType::kInt32, Device::kCPU, {2});
  expect_rejected(t, params, "cache_batch_idx");  // with a paged cache
}

}  // namespace
}  // namespace flashcore::testing
