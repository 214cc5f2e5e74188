#include "common/kvcache_case.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

#include "api/kvcache_problem.h"
#include "cpu/reference_kvcache.h"
#include "flashcore/accuracy.h"

namespace flashcore::testing {
namespace {

using std::int64_t;

HostTensor deep_copy(const HostTensor& t) {
  HostTensor copy(t.dtype(), t.shape());
  const std::vector<double> values = t.values();
  for (int64_t i = 0; i < t.numel(); ++i) copy.set(i, values[i]);
  return copy;
}

TensorView int_view(const std::vector<std::int32_t>& v, std::initializer_list<int64_t> shape) {
  return make_view(const_cast<std::int32_t*>(v.data()), DType::kInt32, Device::kCPU, shape);
}

}  // namespace

std::string kvcache_case_name(const KvCacheCase& c) { return c.name; }

KvCacheTensors::KvCacheTensors(const KvCacheCase& kc, DType type, std::uint64_t seed) : c(kc), dtype(type) {
  std::mt19937_64 rng(seed);
  const int64_t d = c.head_dim;
  q = HostTensor(dtype, {c.batch, c.seqlen_q, c.heads_q, d});
  q.fill_normal(rng);
  if (c.page_size > 0) {
    max_pages = (c.capacity + c.page_size - 1) / c.page_size;
    c.capacity = max_pages * c.page_size;  // the table's positions
    const int64_t num_pages = c.batch * max_pages + 3;  // a few pages no sequence uses
    k_cache = HostTensor(dtype, {num_pages, c.page_size, c.heads_kv, d});
    std::vector<std::int32_t> ids(static_cast<size_t>(num_pages));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    block_table.assign(ids.begin(), ids.begin() + c.batch * max_pages);
  } else {
    const int64_t rows = c.batch + (c.batch_idx ? 2 : 0);
    k_cache = HostTensor(dtype, {rows, c.capacity, c.heads_kv, d});
    if (c.batch_idx) {
      std::vector<std::int32_t> ids(static_cast<size_t>(rows));
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);
      cache_batch_idx.assign(ids.begin(), ids.begin() + c.batch);
    }
  }
  v_cache = HostTensor(dtype, k_cache.shape());
  k_cache.fill_normal(rng);
  v_cache.fill_normal(rng);
  if (c.seqlen_new > 0) {
    k_new = HostTensor(dtype, {c.batch, c.seqlen_new, c.heads_kv, d});
    v_new = HostTensor(dtype, {c.batch, c.seqlen_new, c.heads_kv, d});
    k_new.fill_normal(rng);
    v_new.fill_normal(rng);
  }
  if (!c.full) {
    // Sequence 0 fills the cache; the others random lengths (0 included), the new tokens fitting.
    const int64_t room = c.capacity - c.seqlen_new;
    for (int64_t b = 0; b < c.batch; ++b) {
      const int64_t len = b == 0 ? room : std::uniform_int_distribution<int64_t>(0, room)(rng);
      cache_seqlens.push_back(static_cast<std::int32_t>(len));
    }
  }
  if (c.leftpad) {
    for (int64_t b = 0; b < c.batch; ++b) {
      const int64_t len = c.full ? c.capacity : cache_seqlens[b];
      cache_leftpad.push_back(static_cast<std::int32_t>(std::uniform_int_distribution<int64_t>(0, len)(rng)));
    }
  }
  if (c.rotary != 0) {
    const int64_t rd = c.rotary_dim > 0 ? c.rotary_dim : d;
    rotary_cos = HostTensor(dtype, {c.capacity, rd / 2});
    rotary_sin = HostTensor(dtype, {c.capacity, rd / 2});
    for (int64_t pos = 0; pos < c.capacity; ++pos)
      for (int64_t i = 0; i < rd / 2; ++i) {
        const double angle = static_cast<double>(pos) * std::pow(10000.0, -2.0 * static_cast<double>(i) / rd);
        rotary_cos.set(pos * (rd / 2) + i, std::cos(angle));
        rotary_sin.set(pos * (rd / 2) + i, std::sin(angle));
      }
  }
  if (c.alibi != 0) {
    std::uniform_real_distribution<float> slope(0.0f, 0.3f);
    for (int64_t i = 0; i < c.heads_q * (c.alibi == 2 ? c.batch : 1); ++i) alibi_slopes.push_back(slope(rng));
  }
  out = HostTensor(dtype, {c.batch, c.seqlen_q, c.heads_q, d});
  lse = HostTensor(DType::kFloat32, {c.batch, c.heads_q, c.seqlen_q});
  out.poison();
  lse.poison();
  k_cache_before = deep_copy(k_cache);
  v_cache_before = deep_copy(v_cache);
}

KvCacheParams KvCacheTensors::host_params(Backend backend) const {
  KvCacheParams p;
  p.q = q.view();
  p.k_cache = k_cache.view();
  p.v_cache = v_cache.view();
  if (c.seqlen_new > 0) {
    p.k_new = k_new.view();
    p.v_new = v_new.view();
  }
  if (c.rotary != 0) {
    p.rotary_cos = rotary_cos.view();
    p.rotary_sin = rotary_sin.view();
    p.rotary_interleaved = c.rotary == 1;
  }
  if (!cache_seqlens.empty()) p.cache_seqlens = int_view(cache_seqlens, {c.batch});
  if (!cache_batch_idx.empty()) p.cache_batch_idx = int_view(cache_batch_idx, {c.batch});
  if (!cache_leftpad.empty()) p.cache_leftpad = int_view(cache_leftpad, {c.batch});
  if (!block_table.empty()) p.block_table = int_view(block_table, {c.batch, max_pages});
  p.out = out.view();
  p.lse = lse.view();
  p.causal = c.causal;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  p.softcap = c.softcap;
  if (c.alibi == 1) p.alibi_slopes = make_view(const_cast<float*>(alibi_slopes.data()), DType::kFloat32, Device::kCPU, {c.heads_q});
  if (c.alibi == 2) {
    p.alibi_slopes = make_view(const_cast<float*>(alibi_slopes.data()), DType::kFloat32, Device::kCPU, {c.batch, c.heads_q});
  }
  p.num_splits = c.num_splits;
  p.backend = backend;
  return p;
}

std::string check_kvcache_results(const KvCacheTensors& t) {
  using namespace flashcore::accuracy;
  // The reference reads the cache as it was (its old positions; new ones come from k_new / v_new).
  KvCacheParams params = t.host_params(Backend::kCpuReference);
  params.k_cache = t.k_cache_before.view();
  params.v_cache = t.v_cache_before.view();
  detail::KvCacheProblem p;
  if (Status s = detail::validate_kvcache(params, &p); !s.ok()) return "validate: " + s.message();
  detail::KvCacheIndices x;
  detail::read_host_indices(params, p, &x);
  std::vector<double> ref_out, ref_lse, k_appended;
  std::vector<cpu::KvSequenceF64> seqs;
  if (Status s = cpu::reference_kvcache_f64(params, p, x, &ref_out, &ref_lse, &k_appended, &seqs); !s.ok()) {
    return "reference: " + s.message();
  }
  // The same-precision baseline, per sequence, on the reference's inputs rounded to the dtype.
  const int64_t d = t.c.head_dim, hq = t.c.heads_q, sq = t.c.seqlen_q, hkv = t.c.heads_kv;
  std::vector<double> base_out, base_lse;
  for (int64_t b = 0; b < t.c.batch; ++b) {
    const cpu::KvSequenceF64& s = seqs[b];
    if (s.seqlen_k == 0) {
      base_out.insert(base_out.end(), sq * hq * d, 0.0);
      base_lse.insert(base_lse.end(), hq * sq, -INFINITY);
      continue;
    }
    ReferenceProblem r;
    r.batch = 1;
    r.seqlen_q = sq;
    r.seqlen_k = s.seqlen_k;
    r.heads_q = hq;
    r.heads_kv = hkv;
    r.head_dim = d;
    r.softmax_scale = p.attn.softmax_scale;
    r.causal = t.c.causal;
    r.window_left = t.c.window_left;
    r.window_right = t.c.window_right;
    r.softcap = t.c.softcap;
    std::vector<double> slopes;
    if (t.c.alibi != 0) {
      for (int64_t h = 0; h < hq; ++h) slopes.push_back(t.alibi_slopes[(t.c.alibi == 2 ? b * hq : 0) + h]);
      r.alibi_slopes = slopes.data();
    }
    const auto rounded = [&](std::vector<double> v) {
      for (double& e : v) e = round_to(t.dtype, e);
      return v;
    };
    const BaselineForward base = baseline_forward(r, t.dtype, rounded(s.q), rounded(s.k), rounded(s.v));
    base_out.insert(base_out.end(), base.out.begin(), base.out.end());
    base_lse.insert(base_lse.end(), base.lse.begin(), base.lse.end());
  }
  std::string failures;
  const Comparison out = compare_to_reference("out", t.dtype, 2.0, t.out.values(), base_out, ref_out);
  if (!out.ok) failures += out.message + "\n";
  const Comparison lse = compare_to_reference("lse", DType::kFloat32, 2.0, t.lse.values(), base_lse, ref_lse);
  if (!lse.ok) failures += lse.message + "\n";

  // The caches: the appended rows where they belong (k within 1 ulp of the float64 rotation
  // rounded, v exact), every other element as it was.
  std::vector<double> k_want = t.k_cache_before.values(), v_want = t.v_cache_before.values();
  std::vector<bool> is_new_k(k_want.size(), false);
  const std::vector<int64_t>& shape = t.k_cache.shape();
  const std::vector<double> v_new = t.c.seqlen_new > 0 ? t.v_new.values() : std::vector<double>{};
  for (int64_t b = 0; b < t.c.batch; ++b)
    for (int64_t n = 0; n < t.c.seqlen_new; ++n) {
      const cpu::CacheSlot slot = cpu::cache_slot(p, x, b, x.cache_seqlens[b] + n);
      for (int64_t h = 0; h < hkv; ++h)
        for (int64_t c = 0; c < d; ++c) {
          const int64_t at = ((slot.row * shape[1] + slot.slot) * hkv + h) * d + c;
          const int64_t src = ((b * t.c.seqlen_new + n) * hkv + h) * d + c;
          k_want[at] = k_appended[src];
          is_new_k[at] = true;
          v_want[at] = v_new[src];
        }
    }
  const std::vector<double> k_got = t.k_cache.values(), v_got = t.v_cache.values();
  int64_t bad_k = 0, bad_v = 0, first_bad = -1;
  for (size_t i = 0; i < k_got.size(); ++i) {
    const double tolerance = is_new_k[i] ? ulp_at(t.dtype, k_want[i]) : 0.0;
    if (!(std::fabs(k_got[i] - k_want[i]) <= tolerance)) {
      ++bad_k;
      if (first_bad < 0) first_bad = static_cast<int64_t>(i);
    }
    if (!(v_got[i] == v_want[i])) ++bad_v;
  }
  if (bad_k != 0 || bad_v != 0) {
    std::ostringstream msg;
    msg << "cache: " << bad_k << " k_cache and " << bad_v << " v_cache elements differ from the expected append";
    if (first_bad >= 0) msg << " (first k at " << first_bad << ": got " << k_got[first_bad] << ", want " << k_want[first_bad] << ")";
    failures += msg.str() + "\n";
  }
  return failures;
}

std::vector<KvCacheCase> kvcache_cases() {
  std::vector<KvCacheCase> cases;
  const auto add = [&](KvCacheCase c) { cases.push_back(c); };
  // name, batch, sq, hq, hkv, d, capacity, page, new, rotary, rotary_dim, causal, wl, wr, softcap, alibi, leftpad, batch_idx, full, splits
  add({"decode_contiguous_gqa", 3, 1, 8, 2, 64, 200, 0, 1, 0, 0, false});
  add({"decode_full_no_seqlens", 2, 1, 4, 4, 128, 130, 0, 0, 0, 0, false, -1, -1, 0.0f, 0, false, false, true});
  add({"paged_1_gqa", 3, 1, 8, 2, 64, 97, 1, 1, 0, 0, false});
  add({"paged_16_rotary_interleaved", 3, 1, 8, 2, 128, 256, 16, 1, 1, 0, false});
  add({"paged_64_rotary_halves_partial", 2, 1, 4, 1, 64, 320, 64, 2, 2, 32, true});
  add({"paged_256_mqa", 2, 1, 8, 1, 64, 512, 256, 1, 0, 0, false});
  add({"batch_idx_leftpad", 3, 1, 4, 2, 64, 150, 0, 1, 1, 0, false, -1, -1, 0.0f, 0, true, true});
  add({"paged_leftpad", 3, 1, 4, 2, 64, 160, 16, 1, 0, 0, false, -1, -1, 0.0f, 0, true});
  add({"speculative_causal_sq4", 3, 4, 8, 2, 64, 200, 16, 4, 2, 0, true});
  add({"speculative_causal_sq5_no_new", 2, 5, 4, 2, 64, 100, 0, 0, 0, 0, true});
  add({"window_paged", 3, 3, 4, 2, 64, 300, 16, 3, 0, 0, true, 40, -1});
  add({"window_noncausal", 2, 2, 4, 4, 64, 200, 0, 2, 1, 0, false, 30, 1});
  add({"softcap_paged", 2, 2, 8, 2, 64, 180, 16, 2, 0, 0, true, -1, -1, 2.0f});
  add({"alibi_per_batch", 3, 2, 4, 2, 64, 150, 16, 1, 0, 0, true, -1, -1, 0.0f, 2});
  add({"alibi_heads_noncausal", 2, 1, 4, 1, 64, 120, 0, 1, 0, 0, false, -1, -1, 0.0f, 1});
  add({"all_options_d128", 2, 3, 8, 2, 128, 240, 16, 3, 1, 0, true, 64, -1, 1.5f, 1, true});
  add({"group16_rows_chunked", 2, 2, 16, 1, 64, 128, 16, 2, 2, 0, true});
  add({"d256_page_16", 2, 1, 4, 2, 256, 96, 16, 1, 0, 0, false});
  add({"d32_page_1", 2, 1, 4, 2, 32, 70, 1, 1, 1, 0, false});
  add({"long_splits_7", 2, 1, 8, 2, 128, 2000, 16, 1, 1, 0, false, -1, -1, 0.0f, 0, false, false, false, 7});
  add({"long_splits_auto", 1, 1, 8, 2, 128, 3000, 0, 1, 0, 0, false});
  // Head dims that are not a multiple of 8: the CUDA path runs them on padded copies of what the
  // kernels read (src/cuda/kvcache_staging.cu) and writes the append back into the caller's cache.
  add({"d59_batch_idx_leftpad_rotary", 3, 1, 6, 2, 59, 150, 0, 1, 1, 40, false, -1, -1, 0.0f, 0, true, true});
  add({"d40_paged_16_speculative_halves", 2, 3, 4, 1, 40, 96, 16, 3, 2, 0, true});
  add({"d59_full_no_seqlens", 2, 1, 4, 4, 59, 70, 0, 0, 0, 0, false, -1, -1, 0.0f, 0, false, false, true});
  add({"d100_page_1_window_softcap", 2, 2, 4, 2, 100, 70, 1, 2, 0, 0, true, 20, -1, 1.5f});
  return cases;
}

}  // namespace flashcore::testing
