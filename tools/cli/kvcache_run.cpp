// `flashcore run --kvcache`: forward_kvcache (flashcore/kvcache.h) on seeded random data — a
// contiguous or paged cache filled to --seqlen-k positions after appending --new tokens — timed on
// the CPU or the GPU, and with --check judged against the float64 reference by FlashAttention's
// rule. No rotary here: the appended keys are then exact copies of k_new, so each sequence's
// attention is plain attention over its cache rows, and the public reference and baseline
// (flashcore/reference.h, flashcore/accuracy.h) judge it.
#include "kvcache_run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#ifdef FLASHCORE_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "flashcore/accuracy.h"
#include "flashcore/flashcore.h"
#include "host_data.h"
#include "run_command.h"
#include "runner.h"
#include "stats.h"

namespace flashcore::cli {
namespace {

using std::int64_t;

struct HostKvCache {
  std::vector<double> q, k_cache, v_cache, k_new, v_new;  // values, rounded to the dtype
  std::vector<std::int32_t> cache_seqlens, block_table;
  std::vector<float> slopes;  // (batch, heads_q) or empty
  int64_t rows = 0;            // cache rows (contiguous) or pages (paged)
  int64_t row_len = 0;         // seqlen_cache or page_size
  int64_t max_pages = 0;
};

std::vector<double> random_values(std::mt19937_64& rng, int64_t count, DType dtype) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> v(static_cast<size_t>(count));
  for (double& x : v) x = accuracy::round_to(dtype, normal(rng));
  return v;
}

HostKvCache make_data(const Options& o) {
  HostKvCache h;
  std::mt19937_64 rng(o.seed);
  const int64_t d = o.head_dim, cap = o.seqlen_k;
  h.q = random_values(rng, o.batch * o.seqlen_q * o.heads_q * d, o.dtype);
  if (o.page_size > 0) {
    h.max_pages = (cap + o.page_size - 1) / o.page_size;
    h.rows = o.batch * h.max_pages;
    h.row_len = o.page_size;
    h.block_table.resize(static_cast<size_t>(h.rows));
    std::iota(h.block_table.begin(), h.block_table.end(), 0);
    std::shuffle(h.block_table.begin(), h.block_table.end(), rng);
  } else {
    h.rows = o.batch;
    h.row_len = cap;
  }
  h.k_cache = random_values(rng, h.rows * h.row_len * o.heads_kv * d, o.dtype);
  h.v_cache = random_values(rng, h.rows * h.row_len * o.heads_kv * d, o.dtype);
  h.k_new = random_values(rng, o.batch * o.kv_new * o.heads_kv * d, o.dtype);
  h.v_new = random_values(rng, o.batch * o.kv_new * o.heads_kv * d, o.dtype);
  h.cache_seqlens.assign(static_cast<size_t>(o.batch), static_cast<std::int32_t>(cap - o.kv_new));
  if (o.alibi) {
    std::uniform_real_distribution<float> slope(0.0f, 0.3f);
    for (int64_t i = 0; i < o.batch * o.heads_q; ++i) h.slopes.push_back(slope(rng));
  }
  return h;
}

// The float64 reference and the same-precision baseline, sequence by sequence, over the cache rows
// after the append (cache positions [0, cache_seqlens) from the cache, then k_new / v_new).
void reference_and_baseline(const Options& o, const HostKvCache& h, accuracy::BaselineForward* ref,
                            accuracy::BaselineForward* base) {
  const int64_t d = o.head_dim, hkv = o.heads_kv, n_new = o.kv_new, sk = o.seqlen_k;
  for (int64_t b = 0; b < o.batch; ++b) {
    std::vector<double> k(static_cast<size_t>(sk * hkv * d)), v(k.size());
    for (int64_t j = 0; j < sk; ++j)
      for (int64_t hh = 0; hh < hkv; ++hh) {
        const double* ks;
        const double* vs;
        const int64_t len = h.cache_seqlens[b];
        if (j < len) {
          const int64_t row = o.page_size > 0 ? h.block_table[b * h.max_pages + j / o.page_size] : b;
          const int64_t slot = o.page_size > 0 ? j % o.page_size : j;
          ks = &h.k_cache[((row * h.row_len + slot) * hkv + hh) * d];
          vs = &h.v_cache[((row * h.row_len + slot) * hkv + hh) * d];
        } else {
          ks = &h.k_new[((b * n_new + j - len) * hkv + hh) * d];
          vs = &h.v_new[((b * n_new + j - len) * hkv + hh) * d];
        }
        std::copy(ks, ks + d, &k[(j * hkv + hh) * d]);
        std::copy(vs, vs + d, &v[(j * hkv + hh) * d]);
      }
    ReferenceProblem r;
    r.batch = 1;
    r.seqlen_q = o.seqlen_q;
    r.seqlen_k = sk;
    r.heads_q = o.heads_q;
    r.heads_kv = hkv;
    r.head_dim = d;
    r.softmax_scale = 1.0 / std::sqrt(static_cast<double>(d));
    r.causal = o.causal;
    r.window_left = o.window_left;
    r.window_right = o.window_right;
    r.softcap = o.softcap;
    std::vector<double> slopes;
    if (o.alibi) {
      for (int64_t hq = 0; hq < o.heads_q; ++hq) slopes.push_back(h.slopes[b * o.heads_q + hq]);
      r.alibi_slopes = slopes.data();
    }
    const std::vector<double> q(h.q.begin() + b * o.seqlen_q * o.heads_q * d,
                                h.q.begin() + (b + 1) * o.seqlen_q * o.heads_q * d);
    std::vector<double> out(q.size()), lse(static_cast<size_t>(o.heads_q * o.seqlen_q));
    (void)reference_forward(r, q.data(), k.data(), v.data(), out.data(), lse.data(), o.threads);
    ref->out.insert(ref->out.end(), out.begin(), out.end());
    ref->lse.insert(ref->lse.end(), lse.begin(), lse.end());
    const accuracy::BaselineForward one = accuracy::baseline_forward(r, o.dtype, q, k, v, o.threads);
    base->out.insert(base->out.end(), one.out.begin(), one.out.end());
    base->lse.insert(base->lse.end(), one.lse.begin(), one.lse.end());
  }
}

// Memory the call's tensors live in: host vectors, or device copies of them.
class Buffers {
 public:
  explicit Buffers(bool on_cuda) : on_cuda_(on_cuda) {}
  ~Buffers() {
#ifdef FLASHCORE_WITH_CUDA
    for (void* p : device_) cudaFree(p);
#endif
  }
  // A tensor of `bytes` initialised from `bytes_in` (may be null: uninitialised).
  Status make(const std::vector<std::byte>& host, std::size_t bytes, void** data) {
    if (!on_cuda_) {
      host_.emplace_back(std::max(bytes, host.size()));
      if (!host.empty()) std::copy(host.begin(), host.end(), host_.back().begin());
      *data = host_.back().data();
      return Status::Ok();
    }
#ifdef FLASHCORE_WITH_CUDA
    void* p = nullptr;
    if (cudaMalloc(&p, std::max<std::size_t>(bytes, 16)) != cudaSuccess) return Status::CudaError("cudaMalloc failed");
    device_.push_back(p);
    if (!host.empty() && cudaMemcpy(p, host.data(), host.size(), cudaMemcpyHostToDevice) != cudaSuccess) {
      return Status::CudaError("cudaMemcpy to the device failed");
    }
    *data = p;
    return Status::Ok();
#else
    return Status::NotSupported("this flashcore was built without CUDA");
#endif
  }
  Status read(const void* data, std::size_t bytes, std::vector<std::byte>* host) const {
    host->resize(bytes);
    if (!on_cuda_) {
      std::copy_n(static_cast<const std::byte*>(data), bytes, host->begin());
      return Status::Ok();
    }
#ifdef FLASHCORE_WITH_CUDA
    if (cudaMemcpy(host->data(), data, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
      return Status::CudaError("cudaMemcpy from the device failed");
    }
#endif
    return Status::Ok();
  }
  void synchronize() const {
#ifdef FLASHCORE_WITH_CUDA
    if (on_cuda_) cudaDeviceSynchronize();
#endif
  }

 private:
  bool on_cuda_;
  std::vector<std::vector<std::byte>> host_;
  std::vector<void*> device_;
};

std::vector<std::byte> int_bytes(const std::vector<std::int32_t>& v) {
  std::vector<std::byte> bytes(v.size() * sizeof(std::int32_t));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

std::vector<std::byte> float_bytes(const std::vector<float>& v) {
  std::vector<std::byte> bytes(v.size() * sizeof(float));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

}  // namespace

int kvcache_run(const Options& o, bool on_cuda) {
  const HostKvCache h = make_data(o);
  const Device device = on_cuda ? Device::kCUDA : Device::kCPU;
  const DType dt = o.dtype;
  const std::size_t e = dtype_size(dt);
  Buffers buffers(on_cuda);
  KvCacheParams p;
  void* data = nullptr;
  const auto tensor = [&](const std::vector<double>& values, std::initializer_list<int64_t> shape, TensorView* view) {
    Status s = buffers.make(encode(values, dt), values.size() * e, &data);
    *view = make_view(data, dt, device, shape);
    return s;
  };
  const int64_t d = o.head_dim;
  Status status = tensor(h.q, {o.batch, o.seqlen_q, o.heads_q, d}, &p.q);
  if (status.ok()) status = tensor(h.k_cache, {h.rows, h.row_len, o.heads_kv, d}, &p.k_cache);
  if (status.ok()) status = tensor(h.v_cache, {h.rows, h.row_len, o.heads_kv, d}, &p.v_cache);
  if (status.ok() && o.kv_new > 0) status = tensor(h.k_new, {o.batch, o.kv_new, o.heads_kv, d}, &p.k_new);
  if (status.ok() && o.kv_new > 0) status = tensor(h.v_new, {o.batch, o.kv_new, o.heads_kv, d}, &p.v_new);
  if (status.ok()) {
    status = buffers.make(int_bytes(h.cache_seqlens), h.cache_seqlens.size() * 4, &data);
    p.cache_seqlens = make_view(data, DType::kInt32, device, {o.batch});
  }
  if (status.ok() && o.page_size > 0) {
    status = buffers.make(int_bytes(h.block_table), h.block_table.size() * 4, &data);
    p.block_table = make_view(data, DType::kInt32, device, {o.batch, h.max_pages});
  }
  if (status.ok() && o.alibi) {
    status = buffers.make(float_bytes(h.slopes), h.slopes.size() * 4, &data);
    p.alibi_slopes = make_view(data, DType::kFloat32, device, {o.batch, o.heads_q});
  }
  if (status.ok()) status = buffers.make({}, static_cast<std::size_t>(o.batch * o.seqlen_q * o.heads_q * d) * e, &data);
  p.out = make_view(data, dt, device, {o.batch, o.seqlen_q, o.heads_q, d});
  if (status.ok()) status = buffers.make({}, static_cast<std::size_t>(o.batch * o.heads_q * o.seqlen_q) * 4, &data);
  p.lse = make_view(data, DType::kFloat32, device, {o.batch, o.heads_q, o.seqlen_q});
  if (!status.ok()) {
    std::fprintf(stderr, "flashcore: %s\n", status.message().c_str());
    return kExitFailed;
  }
  p.causal = o.causal;
  p.window_left = o.window_left;
  p.window_right = o.window_right;
  p.softcap = static_cast<float>(o.softcap);
  p.num_splits = o.num_splits;
  p.kernels = o.kernels;
  p.num_threads = o.threads;

  // The first call checks the indices; the timed ones skip the host copy (no synchronisation).
  // Every call appends the same rows at the same positions, so the cache ends as after one.
  status = forward_kvcache(p);
  p.check_indices = false;
  const int warmup = o.warmup >= 0 ? o.warmup : default_warmup(on_cuda);
  const int repeats = o.repeats >= 0 ? o.repeats : default_repeats(on_cuda);
  for (int i = 0; status.ok() && i < warmup; ++i) status = forward_kvcache(p);
  std::vector<double> ms;
  for (int i = 0; status.ok() && i < repeats; ++i) {
    buffers.synchronize();
    const auto start = std::chrono::steady_clock::now();
    status = forward_kvcache(p);
    buffers.synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  if (!status.ok()) {
    std::fprintf(stderr, "flashcore: %s\n", status.message().c_str());
    return kExitFailed;
  }
  const double median = quantile(ms, 0.5);  // 0 with --repeats 0 (one untimed call)
  const double kv_bytes = 2.0 * static_cast<double>(o.batch * o.seqlen_k * o.heads_kv * d * static_cast<int64_t>(e));
  const double kv_gbps = median > 0.0 ? kv_bytes / (median * 1e-3) / 1e9 : 0.0;
  bool passed = true;
  std::string check_text;
  if (o.check) {
    std::vector<std::byte> out_bytes, lse_bytes;
    buffers.read(p.out.data, static_cast<std::size_t>(p.out.numel()) * e, &out_bytes);
    buffers.read(p.lse.data, static_cast<std::size_t>(p.lse.numel()) * 4, &lse_bytes);
    accuracy::BaselineForward ref, base;
    reference_and_baseline(o, h, &ref, &base);
    const auto out = accuracy::compare_to_reference("out", dt, 2.0, decode(out_bytes.data(), dt, p.out.numel()),
                                                    base.out, ref.out);
    const auto lse = accuracy::compare_to_reference("lse", DType::kFloat32, 2.0,
                                                    decode(lse_bytes.data(), DType::kFloat32, p.lse.numel()),
                                                    base.lse, ref.lse);
    passed = out.ok && lse.ok;
    check_text = out.message + "; " + lse.message;
  }
  const std::string where = on_cuda ? cuda_device_name() : "cpu";
  if (o.json) {
    std::printf(
        "{\"impl\": \"flashcore\", \"pass\": \"decode\", \"device\": \"%s\", \"dtype\": \"%s\", \"head_dim\": %lld, "
        "\"causal\": %s, \"batch\": %lld, \"heads\": %lld, \"heads_kv\": %lld, \"seqlen_q\": %lld, \"seqlen_k\": %lld, "
        "\"page_size\": %lld, \"seqlen_new\": %lld, \"ms\": %.6f, \"kv_gbps\": %.3f, \"check\": %s}\n",
        where.c_str(), dtype_name(dt), static_cast<long long>(d), o.causal ? "true" : "false",
        static_cast<long long>(o.batch), static_cast<long long>(o.heads_q), static_cast<long long>(o.heads_kv),
        static_cast<long long>(o.seqlen_q), static_cast<long long>(o.seqlen_k), static_cast<long long>(o.page_size),
        static_cast<long long>(o.kv_new), median, kv_gbps,
        !o.check ? "null" : passed ? "\"ok\"" : "\"failed\"");
  } else {
    std::printf("flashcore decode on %s: B=%lld Sq=%lld cache=%lld new=%lld H=%lld/%lld D=%lld %s %s: %.4f ms "
                "(median of %d), KV %.2f GB/s\n",
                where.c_str(), static_cast<long long>(o.batch), static_cast<long long>(o.seqlen_q),
                static_cast<long long>(o.seqlen_k), static_cast<long long>(o.kv_new),
                static_cast<long long>(o.heads_q), static_cast<long long>(o.heads_kv), static_cast<long long>(d),
                dtype_name(dt), o.page_size > 0 ? ("page " + std::to_string(o.page_size)).c_str() : "contiguous",
                median, repeats, kv_gbps);
    if (o.check) std::printf("check %s: %s\n", passed ? "ok" : "FAILED", check_text.c_str());
  }
  return passed ? kExitOk : kExitFailed;
}

}  // namespace flashcore::cli
