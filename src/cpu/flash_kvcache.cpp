// forward_kvcache on the CPU flash backend: the append (rotary in fp32, rounded to the dtype, as the
// GPU kernels do it), q rotated into a copy, then each sequence's attention through flash_forward
// (threaded over heads and query blocks) on a view of its cache rows, or on a contiguous gather of
// its pages when the cache is paged.
#include <cmath>
#include <cstdint>
#include <limits>
#include <new>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/element.h"
#include "cpu/reference_kvcache.h"

namespace flashcore::cpu {
namespace {

using std::int64_t;

// Row `src` (head_dim elements) rotated at `position` into `dst`, in fp32 (kvcache.h's rule).
template <typename Element>
void rotate_row(const KvCacheParams& params, const detail::KvCacheProblem& p, const Element* src, int64_t position,
                Element* dst) {
  const int64_t d = p.attn.head_dim;
  if (p.rotary_dim == 0) {
    for (int64_t c = 0; c < d; ++c) dst[c] = src[c];
    return;
  }
  const int64_t half = p.rotary_dim / 2;
  const TensorView& cs = params.rotary_cos;
  const TensorView& sn = params.rotary_sin;
  const Element* cos_row = static_cast<const Element*>(cs.data) + position * cs.stride[0];
  const Element* sin_row = static_cast<const Element*>(sn.data) + position * sn.stride[0];
  for (int64_t c = p.rotary_dim; c < d; ++c) dst[c] = src[c];
  for (int64_t i = 0; i < half; ++i) {
    const float cos = static_cast<float>(cos_row[i * cs.stride[1]]);
    const float sin = static_cast<float>(sin_row[i * sn.stride[1]]);
    const int64_t a = p.rotary_interleaved ? 2 * i : i;
    const int64_t b = p.rotary_interleaved ? 2 * i + 1 : i + half;
    const float xa = static_cast<float>(src[a]);
    const float xb = static_cast<float>(src[b]);
    dst[a] = static_cast<Element>(xa * cos - xb * sin);
    dst[b] = static_cast<Element>(xa * sin + xb * cos);
  }
}

template <typename Element>
Status run(const KvCacheParams& params, const detail::KvCacheProblem& p, const detail::KvCacheIndices& x) {
  const detail::AttentionProblem& a = p.attn;
  const int64_t d = a.head_dim, hq = a.heads_q, hkv = a.heads_kv, sq = a.seqlen_q;
  // 1. The append.
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t t = 0; t < p.seqlen_new; ++t) {
      const int64_t pos = x.cache_seqlens[b] + t;
      const CacheSlot s = cache_slot(p, x, b, pos);
      for (int64_t h = 0; h < hkv; ++h) {
        rotate_row(params, p, row_ptr<const Element>(params.k_new, b, t, h), pos,
                   row_ptr<Element>(params.k_cache, s.row, s.slot, h));
        const Element* vn = row_ptr<const Element>(params.v_new, b, t, h);
        Element* vc = row_ptr<Element>(params.v_cache, s.row, s.slot, h);
        for (int64_t c = 0; c < d; ++c) vc[c] = vn[c];
      }
    }
  // 2. q, rotated into a contiguous copy when the call has rotary.
  std::vector<Element> q_rotated;
  TensorView q = params.q;
  if (p.rotary_dim > 0) {
    q_rotated.resize(static_cast<size_t>(a.batch * sq * hq * d));
    for (int64_t b = 0; b < a.batch; ++b)
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t h = 0; h < hq; ++h)
          rotate_row(params, p, row_ptr<const Element>(params.q, b, i, h),
                     x.cache_seqlens[b] + (p.rotate_q_per_row ? i : 0), &q_rotated[((b * sq + i) * hq + h) * d]);
    q = make_view(q_rotated.data(), a.dtype, Device::kCPU, {a.batch, sq, hq, d});
  }
  // 3. Each sequence's attention over cache positions [leftpad, cache_seqlens + seqlen_new).
  std::vector<Element> gathered_k, gathered_v;
  for (int64_t b = 0; b < a.batch; ++b) {
    const int64_t begin = x.cache_leftpad[b], sk = x.seqlen_k(p, b);
    if (sk == 0) {  // no key: output 0, LSE -inf
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t h = 0; h < hq; ++h) {
          Element* o = row_ptr<Element>(params.out, b, i, h);
          for (int64_t c = 0; c < d; ++c) o[c] = Element(0.0f);
          if (params.lse.present()) lse_at(params.lse, b, h, i) = -std::numeric_limits<float>::infinity();
        }
      continue;
    }
    ForwardParams f;
    const auto batch_view = [](TensorView t, int64_t index) {
      t.data = static_cast<char*>(t.data) + index * t.stride[0] * static_cast<int64_t>(dtype_size(t.dtype));
      t.shape[0] = 1;
      return t;
    };
    f.q = batch_view(q, b);
    f.out = batch_view(params.out, b);
    if (params.lse.present()) f.lse = batch_view(params.lse, b);
    if (p.paged) {
      gathered_k.resize(static_cast<size_t>(sk * hkv * d));
      gathered_v.resize(gathered_k.size());
      for (int64_t j = 0; j < sk; ++j) {
        const CacheSlot s = cache_slot(p, x, b, begin + j);
        for (int64_t h = 0; h < hkv; ++h) {
          const Element* kr = row_ptr<const Element>(params.k_cache, s.row, s.slot, h);
          const Element* vr = row_ptr<const Element>(params.v_cache, s.row, s.slot, h);
          std::copy(kr, kr + d, &gathered_k[(j * hkv + h) * d]);
          std::copy(vr, vr + d, &gathered_v[(j * hkv + h) * d]);
        }
      }
      f.k = make_view(gathered_k.data(), a.dtype, Device::kCPU, {1, sk, hkv, d});
      f.v = make_view(gathered_v.data(), a.dtype, Device::kCPU, {1, sk, hkv, d});
    } else {
      const auto rows = [&](TensorView t) {
        t = batch_view(t, x.cache_batch_idx[b]);
        t.data = static_cast<char*>(t.data) + begin * t.stride[1] * static_cast<int64_t>(dtype_size(t.dtype));
        t.shape[1] = sk;
        return t;
      };
      f.k = rows(params.k_cache);
      f.v = rows(params.v_cache);
    }
    f.softmax_scale = a.softmax_scale;
    f.causal = params.causal;
    f.window_left = params.window_left;
    f.window_right = params.window_right;
    f.softcap = params.softcap;
    if (params.alibi_slopes.present()) {  // this sequence's (heads_q) slopes
      TensorView s = params.alibi_slopes;
      if (s.rank == 2) {
        s.data = static_cast<float*>(s.data) + b * s.stride[0];
        s.rank = 1;
        s.shape[0] = s.shape[1];
        s.stride[0] = s.stride[1];
      }
      f.alibi_slopes = s;
    }
    f.backend = Backend::kCpu;
    f.num_threads = params.num_threads;
    FLASHCORE_RETURN_IF_ERROR(flashcore::forward(f));
  }
  return Status::Ok();
}

}  // namespace

Status flash_forward_kvcache(const KvCacheParams& params, const detail::KvCacheProblem& problem,
                             const detail::KvCacheIndices& indices) {
  try {
    return dispatch_element(problem.attn.dtype, [&](auto tag) { return run<decltype(tag)>(params, problem, indices); });
  } catch (const std::bad_alloc&) {
    return Status::Internal("flashcore::forward_kvcache: out of host memory");
  }
}

}  // namespace flashcore::cpu
