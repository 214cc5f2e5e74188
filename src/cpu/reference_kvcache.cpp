// The float64 reference of forward_kvcache (reference_kvcache.h) and Backend::kCpuReference's
// forward_kvcache, which rounds its results into the caller's tensors.
#include "cpu/reference_kvcache.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <new>
#include <string>

#include "cpu/cpu_backend.h"
#include "cpu/element.h"
#include "cpu/reference.h"

namespace flashcore::cpu {
namespace {

using std::int64_t;

// Element (i0, i1, i2, d) of a rank-4 view, or (i0, i1) of a rank-2 one, as a double.
double value_at(const TensorView& t, int64_t i0, int64_t i1, int64_t i2, int64_t d) {
  return dispatch_element(t.dtype, [&](auto tag) {
    using Element = decltype(tag);
    const Element* base = static_cast<const Element*>(t.data);
    const int64_t offset = t.rank == 2 ? i0 * t.stride[0] + i1 * t.stride[1]
                                       : i0 * t.stride[0] + i1 * t.stride[1] + i2 * t.stride[2] + d;
    return static_cast<double>(static_cast<float>(base[offset]));
  });
}

// Row (i0, i1, i2, :) of a rank-4 view, rotated at `position` when the problem has rotary: pairs
// (2i, 2i+1) when interleaved, else (i, i + rotary_dim/2); columns past rotary_dim kept.
void rotated_row(const KvCacheParams& params, const detail::KvCacheProblem& p, const TensorView& t, int64_t i0,
                 int64_t i1, int64_t i2, int64_t position, double* row) {
  const int64_t d = p.attn.head_dim;
  for (int64_t c = 0; c < d; ++c) row[c] = value_at(t, i0, i1, i2, c);
  if (p.rotary_dim == 0) return;
  const int64_t half = p.rotary_dim / 2;
  std::vector<double> x(row, row + d);
  for (int64_t i = 0; i < half; ++i) {
    const double cos = value_at(params.rotary_cos, position, i, 0, 0);
    const double sin = value_at(params.rotary_sin, position, i, 0, 0);
    const int64_t a = p.rotary_interleaved ? 2 * i : i;
    const int64_t b = p.rotary_interleaved ? 2 * i + 1 : i + half;
    row[a] = x[a] * cos - x[b] * sin;
    row[b] = x[a] * sin + x[b] * cos;
  }
}

}  // namespace

CacheSlot cache_slot(const detail::KvCacheProblem& p, const detail::KvCacheIndices& x, int64_t b, int64_t pos) {
  if (!p.paged) return {x.cache_batch_idx[b], pos};
  return {x.block_table[b * p.max_pages + pos / p.page_size], pos % p.page_size};
}

Status reference_kvcache_f64(const KvCacheParams& params, const detail::KvCacheProblem& p,
                             const detail::KvCacheIndices& x, std::vector<double>* out, std::vector<double>* lse,
                             std::vector<double>* k_appended, std::vector<KvSequenceF64>* sequences) {
  const detail::AttentionProblem& a = p.attn;
  const int64_t d = a.head_dim, hq = a.heads_q, hkv = a.heads_kv, sq = a.seqlen_q, n_new = p.seqlen_new;
  try {
    out->assign(static_cast<size_t>(a.batch * sq * hq * d), 0.0);
    lse->assign(static_cast<size_t>(a.batch * hq * sq), 0.0);
    k_appended->assign(static_cast<size_t>(a.batch * n_new * hkv * d), 0.0);
    for (int64_t b = 0; b < a.batch; ++b) {
      const int64_t len = x.cache_seqlens[b], pad = x.cache_leftpad[b], sk = len + n_new - pad;
      std::vector<double> q(static_cast<size_t>(sq * hq * d));
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t h = 0; h < hq; ++h)
          rotated_row(params, p, params.q, b, i, h, len + (p.rotate_q_per_row ? i : 0), &q[(i * hq + h) * d]);
      std::vector<double> k(static_cast<size_t>(sk * hkv * d)), v(k.size());
      for (int64_t j = 0; j < sk; ++j) {
        const int64_t pos = pad + j;
        for (int64_t h = 0; h < hkv; ++h) {
          double* kr = &k[(j * hkv + h) * d];
          double* vr = &v[(j * hkv + h) * d];
          if (pos < len) {
            const CacheSlot s = cache_slot(p, x, b, pos);
            for (int64_t c = 0; c < d; ++c) {
              kr[c] = value_at(params.k_cache, s.row, s.slot, h, c);
              vr[c] = value_at(params.v_cache, s.row, s.slot, h, c);
            }
          } else {
            const int64_t t = pos - len;
            rotated_row(params, p, params.k_new, b, t, h, pos, kr);
            for (int64_t c = 0; c < d; ++c) vr[c] = value_at(params.v_new, b, t, h, c);
            std::copy(kr, kr + d, &(*k_appended)[((b * n_new + t) * hkv + h) * d]);
          }
        }
      }
      if (sequences != nullptr) sequences->push_back({sk, q, k, v});
      double* out_b = &(*out)[b * sq * hq * d];
      double* lse_b = &(*lse)[b * hq * sq];
      if (sk == 0) {
        for (int64_t i = 0; i < hq * sq; ++i) lse_b[i] = -std::numeric_limits<double>::infinity();
        continue;
      }
      detail::AttentionProblem one = a;
      one.batch = 1;
      one.seqlen_k = sk;
      one.causal = params.causal;  // the rule as given (reference.cpp applies it without normalising)
      one.window_left = params.window_left;
      one.window_right = params.window_right;
      std::vector<double> slopes;
      if (params.alibi_slopes.present()) {
        const TensorView& s = params.alibi_slopes;
        for (int64_t h = 0; h < hq; ++h) {
          const float* base = static_cast<const float*>(s.data);
          slopes.push_back(s.rank == 2 ? base[b * s.stride[0] + h * s.stride[1]] : base[h * s.stride[0]]);
        }
      }
      reference_attention_forward(one, q.data(), k.data(), v.data(), out_b, lse_b, params.num_threads,
                                  slopes.empty() ? nullptr : slopes.data());
    }
  } catch (const std::bad_alloc&) {
    return Status::Internal("reference_kvcache_f64: out of host memory for the float64 reference");
  }
  return Status::Ok();
}

Status reference_forward_kvcache(const KvCacheParams& params, const detail::KvCacheProblem& p,
                                 const detail::KvCacheIndices& x) {
  std::vector<double> out, lse, k_appended;
  FLASHCORE_RETURN_IF_ERROR(reference_kvcache_f64(params, p, x, &out, &lse, &k_appended));
  const detail::AttentionProblem& a = p.attn;
  const int64_t d = a.head_dim;
  dispatch_element(a.dtype, [&](auto tag) {
    using Element = decltype(tag);
    for (int64_t b = 0; b < a.batch; ++b) {
      for (int64_t t = 0; t < p.seqlen_new; ++t) {
        const CacheSlot s = cache_slot(p, x, b, x.cache_seqlens[b] + t);
        for (int64_t h = 0; h < a.heads_kv; ++h) {
          Element* kr = row_ptr<Element>(params.k_cache, s.row, s.slot, h);
          Element* vr = row_ptr<Element>(params.v_cache, s.row, s.slot, h);
          const Element* vn = row_ptr<const Element>(params.v_new, b, t, h);
          const double* kn = &k_appended[((b * p.seqlen_new + t) * a.heads_kv + h) * d];
          for (int64_t c = 0; c < d; ++c) {
            kr[c] = static_cast<Element>(static_cast<float>(kn[c]));
            vr[c] = vn[c];
          }
        }
      }
      for (int64_t i = 0; i < a.seqlen_q; ++i)
        for (int64_t h = 0; h < a.heads_q; ++h) {
          Element* o = row_ptr<Element>(params.out, b, i, h);
          for (int64_t c = 0; c < d; ++c) o[c] = static_cast<Element>(static_cast<float>(out[((b * a.seqlen_q + i) * a.heads_q + h) * d + c]));
          if (params.lse.present()) lse_at(params.lse, b, h, i) = static_cast<float>(lse[(b * a.heads_q + h) * a.seqlen_q + i]);
        }
    }
  });
  return Status::Ok();
}

}  // namespace flashcore::cpu
