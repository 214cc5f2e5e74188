// forward_kvcache on the GPU (the sm80 family's decode kernels, which every sm80+ GPU runs and
// kernels=auto picks on Hopper too): the CPU suite's cases (contiguous and paged caches with page
// sizes 1, 16, 64, 256, cache_batch_idx, left padding, causal with seqlen_q > 1, window, softcap,
// ALiBi, GQA, rotary) against the float64 reference, with no split, a forced split and the
// heuristic's; the cache after the append; and bad block tables / lengths refused with nothing
// written. Outputs are NaN-poisoned on the device before every run.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "common/kvcache_case.h"
#include "cuda/device.h"
#include "cuda/dispatch.h"
#include "device_tensors.h"
#include "flashcore/kvcache.h"

namespace flashcore::testing {
namespace {

// Device copies of a KvCacheTensors' tensors and index vectors.
class DeviceKvCache {
 public:
  explicit DeviceKvCache(const KvCacheTensors& t)
      : q(t.q), k_cache(t.k_cache), v_cache(t.v_cache), out(t.out), lse(t.lse), host_(t) {
    q.upload(t.q);
    k_cache.upload(t.k_cache);
    v_cache.upload(t.v_cache);
    out.poison();
    lse.poison();
    if (t.c.seqlen_new > 0) {
      k_new = std::make_unique<DeviceMirror>(t.k_new);
      v_new = std::make_unique<DeviceMirror>(t.v_new);
      k_new->upload(t.k_new);
      v_new->upload(t.v_new);
    }
    if (t.c.rotary != 0) {
      cos = std::make_unique<DeviceMirror>(t.rotary_cos);
      sin = std::make_unique<DeviceMirror>(t.rotary_sin);
      cos->upload(t.rotary_cos);
      sin->upload(t.rotary_sin);
    }
  }
  ~DeviceKvCache() {
    for (void* p : buffers_) cudaFree(p);
  }

  KvCacheParams params() {
    KvCacheParams p = host_.host_params(Backend::kCuda);
    p.q = q.view();
    p.k_cache = k_cache.view();
    p.v_cache = v_cache.view();
    p.out = out.view();
    p.lse = lse.view();
    if (k_new) {
      p.k_new = k_new->view();
      p.v_new = v_new->view();
    }
    if (cos) {
      p.rotary_cos = cos->view();
      p.rotary_sin = sin->view();
    }
    for (TensorView* v : {&p.cache_seqlens, &p.cache_batch_idx, &p.cache_leftpad, &p.block_table, &p.alibi_slopes}) {
      if (v->present()) *v = to_device(*v);
    }
    return p;
  }

  void download(KvCacheTensors& t) const {
    out.download_into(t.out);
    lse.download_into(t.lse);
    k_cache.download_into(t.k_cache);
    v_cache.download_into(t.v_cache);
  }

  DeviceMirror q, k_cache, v_cache, out, lse;
  std::unique_ptr<DeviceMirror> k_new, v_new, cos, sin;

 private:
  // A contiguous device copy of a small contiguous host view (int32 indices, float32 slopes).
  TensorView to_device(TensorView v) {
    const size_t bytes = static_cast<size_t>(v.numel()) * dtype_size(v.dtype);
    void* d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, bytes), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(d, v.data, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    buffers_.push_back(d);
    v.data = d;
    v.device = Device::kCUDA;
    return v;
  }
  const KvCacheTensors& host_;
  std::vector<void*> buffers_;
};

using KvParam = std::tuple<KvCacheCase, DType, int>;  // case, dtype, num_splits (-1: the case's own)

std::string param_name(const ::testing::TestParamInfo<KvParam>& info) {
  const int splits = std::get<2>(info.param);
  return std::string(std::get<0>(info.param).name) + (std::get<1>(info.param) == DType::kFloat16 ? "_fp16" : "_bf16") +
         (splits < 0 ? "" : "_splits" + std::to_string(splits));
}

std::uint64_t seed_of(const KvParam& p) {
  std::uint64_t h = 1469598103934665603ull;
  for (const char* c = std::get<0>(p).name; *c; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
  return h + static_cast<std::uint64_t>(std::get<1>(p));
}

// Runs `c` on the GPU: empty when out, lse and the appended cache match the float64 reference,
// else what differs, or why the call or the synchronisation failed.
std::string run_against_reference(const KvCacheCase& c, DType dtype, std::uint64_t seed,
                                  KernelFamily kernels = KernelFamily::kAuto) {
  KvCacheTensors t(c, dtype, seed);
  DeviceKvCache d(t);
  KvCacheParams params = d.params();
  params.kernels = kernels;
  const Status status = forward_kvcache(params);
  if (!status.ok()) return "forward_kvcache: " + status.message();
  if (const cudaError_t error = cudaDeviceSynchronize(); error != cudaSuccess) {
    return std::string("cudaDeviceSynchronize: ") + cudaGetErrorString(error);
  }
  d.download(t);
  return check_kvcache_results(t);
}

class CudaKvCache : public ::testing::TestWithParam<KvParam> {};

TEST_P(CudaKvCache, MatchesReferenceAndAppends) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  KvCacheCase c = std::get<0>(GetParam());
  if (std::get<2>(GetParam()) >= 0) c.num_splits = std::get<2>(GetParam());
  const std::string failures = run_against_reference(c, std::get<1>(GetParam()), seed_of(GetParam()));
  EXPECT_TRUE(failures.empty()) << failures;
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaKvCache,
                         ::testing::Combine(::testing::ValuesIn(kvcache_cases()),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16),
                                            ::testing::Values(-1, 1, 3)),
                         param_name);

// Decode at the benchmark's shape, smaller: GQA 32:8, d128, bf16, page 16 and contiguous, a cache
// long enough that the heuristic splits (also the compute-sanitizer case: *Sanitize*).
TEST(CudaKvCacheSanitize, DecodeGqaPagedAndContiguous) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  for (const std::int64_t page : {0, 16}) {
    KvCacheCase c{"sanitize", 2, 1, 32, 8, 128, 1024, page, 1, 2};
    const std::string failures = run_against_reference(c, DType::kBFloat16, 11);
    EXPECT_TRUE(failures.empty()) << "page " << page << ": " << failures;
  }
}

// Calls on one stream share its cached split workspace, and the fused merge's arrival counters must
// be back at zero after every call, whatever the next call's split count, batch or layout: a run of
// calls with changing shapes (the workspace grows in between), each against the reference.
TEST(CudaKvCacheSanitize, RepeatedCallsShareTheWorkspace) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const int splits[] = {2, 7, 3, 0, 5, 1, 4, 0};
  int call = 0;
  for (const std::int64_t page : {0, 16}) {
    for (const int s : splits) {
      const std::int64_t batch = 1 + call % 3;
      KvCacheCase c{"repeat", batch, 1, 32, 8, 128, 512, page};
      c.num_splits = s;
      const std::string failures = run_against_reference(c, DType::kBFloat16, 100 + call);
      EXPECT_TRUE(failures.empty()) << "call " << call << " (page " << page << ", batch " << batch << ", splits " << s
                                    << "): " << failures;
      ++call;
    }
  }
}

// The fused merge loads the partials 16 splits at a time and 128 columns a pass: more than 16
// splits (three batches of loads at 40) and head dim 256 (two column passes), contiguous and paged,
// full caches (no cache_seqlens), so the split counts are not capped by a short sequence.
TEST(CudaKvCacheSanitize, ManySplitsMergeInBatches) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const std::pair<std::int64_t, int> dims_and_splits[] = {{128, 40}, {256, 20}};
  for (const std::int64_t page : {0, 16}) {
    for (const auto& [head_dim, splits] : dims_and_splits) {
      KvCacheCase c{"many_splits", 1, 1, 32, 8, head_dim, 4096, page};
      c.full = true;
      c.num_splits = splits;
      const std::string failures = run_against_reference(c, DType::kBFloat16, 21);
      EXPECT_TRUE(failures.empty()) << "page " << page << ", head_dim " << head_dim << ", splits " << splits << ": "
                                    << failures;
    }
  }
}

// Split counts from 2 to 16 at the benchmark's head shape (GQA 32:8, d128, bf16), contiguous and
// page 16, full and short sequences: where this build has an sm90 decode row for the GPU, with
// kernels=sm90, so that they run the cluster decode kernel whatever kernels=auto would pick (one
// cluster of `splits` CTAs a sequence merging through distributed shared memory: sizes that are not
// powers of two, 16, the non-portable largest, and the paged kernel); elsewhere the sm80 kernel's
// global merge under kernels=auto (and with FLASHCORE_DECODE_CLUSTER=off, which keeps every problem
// off the cluster kernel: forced sm90 would then have nothing to run).
TEST(CudaKvCacheSanitize, ClusterSplitCounts) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  KernelFamily kernels = KernelFamily::kAuto;
  const char* cluster_mode = std::getenv("FLASHCORE_DECODE_CLUSTER");
  if (cluster_mode == nullptr || std::string(cluster_mode) != "off") {
    detail::AttentionProblem a;
    a.batch = 1, a.seqlen_q = 1, a.seqlen_k = 2048 + 40, a.heads_q = 32, a.heads_kv = 8, a.head_dim = 128;
    a.dtype = DType::kBFloat16, a.device = Device::kCUDA, a.backend = Backend::kCuda;
    cuda::DeviceInfo device;
    ASSERT_TRUE(cuda::current_device("ClusterSplitCounts", &device).ok());
    const cuda::DecodeKernel* row = nullptr;
    if (cuda::select_decode_kernel("ClusterSplitCounts", a, KernelFamily::kSm90, device, &row).ok()) {
      kernels = KernelFamily::kSm90;
    }
  }
  SCOPED_TRACE(std::string("kernels=") + kernel_family_name(kernels));
  for (const std::int64_t page : {0, 16}) {
    for (const int splits : {2, 3, 13, 16}) {
      KvCacheCase c{"cluster_splits", 1, 1, 32, 8, 128, 2048 + 40, page, 1, 1};
      c.num_splits = splits;
      const std::string failures = run_against_reference(c, DType::kBFloat16, 41 + splits, kernels);
      EXPECT_TRUE(failures.empty()) << "page " << page << ", splits " << splits << ": " << failures;
    }
  }
}

// Cache positions past each sequence hold NaN (a fresh cache may): the kernels must never let them
// into the result. A V row read past the sequence and not zeroed would give 0 x NaN = NaN: the
// kernels zero-fill such rows instead of reading them, and v7's early loads (an A/B variant,
// decode_mma_kernel.h's kScheduleEarlyLoads) read a split's first tiles up to the capacity before
// cache_seqlens arrives and zero the keys past the sequence after they land. Sequences end inside a tile and inside a warp's
// 16 keys, some splits see no key at all; contiguous and paged, split counts auto, 40 and 3. The
// poisoned positions must still be NaN afterwards (nothing written there) and are then set to 0 in
// both the result and the "before" copies, so the usual check judges the rest.
TEST(CudaKvCacheSanitize, NanPastTheSequenceNeverReachesTheResult) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  for (const std::int64_t page : {0, 16}) {
    for (const int splits : {0, 40, 3}) {
      KvCacheCase c{"nan_past_sequence", 3, 1, 32, 8, 128, 4096, page};
      c.num_splits = splits;
      KvCacheTensors t(c, DType::kBFloat16, 31);
      t.cache_seqlens = {1000, 4096, 7};  // 15 tiles + 40 keys (2.5 warps), the full cache, 7 keys
      const std::int64_t hkv = t.c.heads_kv, d = t.c.head_dim, slots = t.k_cache.shape()[1];
      std::vector<bool> in_sequence(static_cast<size_t>(t.k_cache.numel()), false);
      for (std::int64_t b = 0; b < t.c.batch; ++b)
        for (std::int64_t pos = 0; pos < t.cache_seqlens[b]; ++pos) {
          const std::int64_t row = page > 0 ? t.block_table[b * t.max_pages + pos / page] : b;
          const std::int64_t slot = page > 0 ? pos % page : pos;
          for (std::int64_t e = 0; e < hkv * d; ++e) in_sequence[((row * slots + slot) * hkv) * d + e] = true;
        }
      const double nan = std::numeric_limits<double>::quiet_NaN();
      for (std::int64_t i = 0; i < t.k_cache.numel(); ++i)
        if (!in_sequence[i])
          for (HostTensor* x : {&t.k_cache, &t.v_cache, &t.k_cache_before, &t.v_cache_before}) x->set(i, nan);
      DeviceKvCache dev(t);
      const Status status = forward_kvcache(dev.params());
      ASSERT_TRUE(status.ok()) << status.message();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      dev.download(t);
      std::int64_t written = 0;
      for (std::int64_t i = 0; i < t.k_cache.numel(); ++i)
        if (!in_sequence[i]) {
          written += !std::isnan(t.k_cache.get(i)) || !std::isnan(t.v_cache.get(i));
          for (HostTensor* x : {&t.k_cache, &t.v_cache, &t.k_cache_before, &t.v_cache_before}) x->set(i, 0.0);
        }
      EXPECT_EQ(written, 0) << "page " << page << ", splits " << splits;
      const std::string failures = check_kvcache_results(t);
      EXPECT_TRUE(failures.empty()) << "page " << page << ", splits " << splits << ": " << failures;
    }
  }
}

TEST(CudaKvCacheValidation, BadIndicesWriteNothing) {
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  KvCacheCase c{"bad", 2, 1, 4, 2, 64, 64, 16, 1};
  KvCacheTensors t(c, DType::kBFloat16, 12);
  t.cache_seqlens = {40, 10};
  t.block_table[2] = 1000;  // page 2 of sequence 0, which it uses
  {
    DeviceKvCache d(t);
    const Status status = forward_kvcache(d.params());
    ASSERT_EQ(status.code(), StatusCode::kInvalidArgument) << status.message();
    EXPECT_NE(status.message().find("block_table"), std::string::npos) << status.message();
    d.download(t);
    EXPECT_EQ(t.k_cache.values(), t.k_cache_before.values());
    EXPECT_EQ(t.v_cache.values(), t.v_cache_before.values());
    EXPECT_TRUE(t.out.all_poisoned());
  }
  t.block_table[2] = 0;
  t.cache_seqlens = {64, 10};  // + 1 new token past the 64 positions
  DeviceKvCache d(t);
  const Status status = forward_kvcache(d.params());
  ASSERT_EQ(status.code(), StatusCode::kInvalidArgument) << status.message();
  EXPECT_NE(status.message().find("cache_seqlens"), std::string::npos) << status.message();
  d.download(t);
  EXPECT_EQ(t.k_cache.values(), t.k_cache_before.values());
  EXPECT_TRUE(t.out.all_poisoned());
}

}  // namespace
}  // namespace flashcore::testing
