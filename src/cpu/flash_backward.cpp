// CPU flash backward, FlashAttention-2's scheme: P is recomputed tile by tile from the forward's
// LSE (never stored), with delta_i = rowsum(dO_i * O_i):
//   dV += Pᵀ dO    dP = dO Vᵀ    dS = P * (dP - delta)    dK += dSᵀ Q * scale    dQ += dS K * scale
//
// Threading. dK/dV of a key block sum over every query row, and dQ of a query block over every key,
// so one pass over tiles would have two tasks adding into the same rows. Two passes avoid that:
//   pass 1: one task per (batch, kv head, key block) owns its dK, dV rows; it loops over the query
//           heads of its group and the query blocks that see its keys;
//   pass 2: one task per (batch, query head, query block) owns its dQ rows; it sweeps the keys.
// Pass 2 recomputes P and dP (two extra tile products, ~40% more arithmetic), which buys no locks,
// no atomics, no per-thread copies of dQ (O(seqlen x head_dim) each) and gradients that are
// bit-identical whatever the thread count, so `deterministic` needs nothing extra.
//
// One pass instead, when there are at least as many (batch, kv head) pairs as workers: one task per
// pair runs pass 1 over all its key blocks and also adds dS K into a float dQ accumulator for its
// query heads (group x seqlen_q x head_dim per worker), so P and dP are formed once: 5 products a
// tile, not 7. Each dQ element sums the same terms in the same order as pass 2 does (key blocks in
// ascending order, keys within a block in order), so both ways give the same bits and the choice,
// which depends on the thread count, does not change the result.
//
// Non-finite inputs: a NaN or infinity reaches the gradients the plain formula sends it to (a NaN
// LSE or out from the forward makes P or delta NaN). Only masked entries need care: their exact 0
// must not multiply a non-finite q, k or dout row, so a partly masked tile whose operand is not
// all finite takes the row-by-row products of masked_products.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/dropout.h"
#include "cpu/element.h"
#include "cpu/flash_tile.h"
#include "cpu/kernels/kernels.h"
#include "cpu/key_range.h"
#include "cpu/masked_products.h"
#include "cpu/parallel_for.h"
#include "cpu/score_mod.h"
#include "cpu/tile_gemm.h"

namespace flashcore::cpu {
namespace {

using std::int64_t;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One worker's tiles; each pass uses the ones it needs.
struct BackwardScratch {
  // bf16: the bf16 products to use (bf16 inputs on a CPU that has them), else null.
  BackwardScratch(int64_t head_dim, const Bf16Kernels* bf16_products)
      : bf16(bf16_products),
        q(kBlockM * head_dim),
        dout(kBlockM * head_dim),
        k(kBlockN * head_dim),
        kt(head_dim * kBlockN),
        vt(head_dim * kBlockN),
        s(kBlockM * kBlockN),
        dp(kBlockM * kBlockN),
        dk(kBlockN * head_dim),
        dv(kBlockN * head_dim),
        dq(kBlockM * head_dim),
        lse(kBlockM),
        delta(kBlockM),
        begin(kBlockM),
        end(kBlockM),
        z(kBlockN) {
    if (bf16 == nullptr) return;
    const int64_t padded = head_dim + head_dim % 2;
    q16.resize(kBlockM * padded);
    dout16.resize(kBlockM * padded);
    qp.resize(kBlockM / 2 * head_dim);
    doutp.resize(kBlockM / 2 * head_dim);
    kt16.resize(padded / 2 * kBlockN);
    vt16.resize(padded / 2 * kBlockN);
    kp.resize(kBlockN / 2 * head_dim);
    t16.resize(kBlockN * kBlockM);
    ds16.resize(kBlockM * kBlockN);
  }
  std::size_t bytes() const {
    return sizeof(float) * (q.size() + dout.size() + k.size() + kt.size() + vt.size() + s.size() + dp.size() +
                            dk.size() + dv.size() + dq.size() + lse.size() + delta.size() + z.size()) +
           sizeof(int64_t) * (begin.size() + end.size()) +
           sizeof(std::uint16_t) * (q16.size() + dout16.size() + t16.size() + ds16.size()) +
           sizeof(std::uint32_t) * (qp.size() + doutp.size() + kt16.size() + vt16.size() + kp.size());
  }
  const Bf16Kernels* bf16;
  std::vector<float> q;         // (kBlockM, head_dim), pre-scaled by softmax_scale (not with softcap or ALiBi)
  std::vector<float> dout;      // (kBlockM, head_dim)
  std::vector<float> k;         // (kBlockN, head_dim)
  std::vector<float> kt;        // (head_dim, kBlockN)
  std::vector<float> vt;        // (head_dim, kBlockN)
  std::vector<float> s;         // (kBlockM, kBlockN): scores, then P
  std::vector<float> dp;        // (kBlockM, kBlockN): dP, then dS
  std::vector<float> dk;        // (kBlockN, head_dim) accumulator, pass 1
  std::vector<float> dv;        // (kBlockN, head_dim) accumulator, pass 1
  std::vector<float> dq;        // (kBlockM, head_dim) accumulator, pass 2
  std::vector<float> lse;       // (kBlockM): the forward's LSE
  std::vector<float> delta;     // (kBlockM): rowsum(dO * O)
  std::vector<int64_t> begin;    // (kBlockM): the key tile's columns [begin, end) each row sees
  std::vector<int64_t> end;
  std::vector<float> z;         // (kBlockN): one row's dropout factors (cpu/dropout.h)
  // With bf16 products (kernels.h: operands read along k come in pairs; head_dim padded to even):
  std::vector<std::uint16_t> q16;     // (kBlockM, head_dim): Q as stored
  std::vector<std::uint16_t> dout16;  // (kBlockM, head_dim): dO as stored
  std::vector<std::uint32_t> qp;      // (kBlockM / 2, head_dim) pairs of Q rows, for dK
  std::vector<std::uint32_t> doutp;   // (kBlockM / 2, head_dim) pairs of dO rows, for dV
  std::vector<std::uint32_t> kt16;    // (head_dim / 2, kBlockN) pairs: Kᵀ, for S
  std::vector<std::uint32_t> vt16;    // (head_dim / 2, kBlockN) pairs: Vᵀ, for dP
  std::vector<std::uint32_t> kp;      // (kBlockN / 2, head_dim) pairs of K rows, for dQ
  std::vector<std::uint16_t> t16;     // (kBlockN, kBlockM): Pᵀ, then dSᵀ, rounded
  std::vector<std::uint16_t> ds16;    // (kBlockM, kBlockN): dS rounded
  bool partly_masked = false;    // some row sees fewer than all of the key tile's columns
  bool query_block_finite = true;  // Q and dO hold no NaN or infinity
};

// Per-row delta = rowsum(dO * O) for every (batch, query head, row), computed once up front since
// both passes need it: (batch, heads_q, seqlen_q) floats.
struct Deltas {
  const detail::AttentionProblem& p;
  std::vector<float> values;
  float* row(int64_t b, int64_t h, int64_t i) { return values.data() + (b * p.heads_q + h) * p.seqlen_q + i; }
};

// The bf16 products for these inputs: bf16 on a CPU that has them, else null.
template <typename Element>
const Bf16Kernels* bf16_products() {
  if constexpr (std::is_same_v<Element, cutlass::bfloat16_t>) return cpu_kernels().bf16;
  return nullptr;
}

// Rows [row0, row0 + rows) of a bf16 view as they are stored, into a (rows, ld) tile; an odd
// head_dim's padding column is 0.
inline void copy_rows16(const TensorView& t, int64_t b, int64_t head, int64_t row0, int64_t rows, std::uint16_t* dst,
                        int64_t ld) {
  const int64_t head_dim = t.shape[3];
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * ld, row_ptr<const std::uint16_t>(t, b, row0 + r, head), sizeof(std::uint16_t) * head_dim);
    if (ld != head_dim) dst[r * ld + head_dim] = 0;
  }
}

template <typename Element>
void compute_deltas(const BackwardParams& params, const detail::AttentionProblem& p, Deltas& deltas) {
  const int64_t tasks = p.batch * p.heads_q;
  const int workers = worker_count(params.num_threads, tasks);
  parallel_for(tasks, workers, [&](int64_t task, int) {
    const int64_t b = task / p.heads_q;
    const int64_t h = task % p.heads_q;
    const CpuKernels& kernels = cpu_kernels();
    const Bf16Kernels* bf16 = bf16_products<Element>();
    for (int64_t i = 0; i < p.seqlen_q; ++i) {
      const Element* o = row_ptr<const Element>(params.out, b, i, h);
      const Element* d_o = row_ptr<const Element>(params.dout, b, i, h);
      if (bf16 != nullptr) {  // as dP's product forms dO · V, so that with one key (O = V) they are equal
        alignas(64) std::uint16_t o16[kMaxHeadDim + 2];
        alignas(64) std::uint16_t do16[kMaxHeadDim + 2];
        const int64_t padded = p.head_dim + p.head_dim % 2;
        std::memcpy(o16, o, sizeof(std::uint16_t) * p.head_dim);
        std::memcpy(do16, d_o, sizeof(std::uint16_t) * p.head_dim);
        o16[p.head_dim] = do16[p.head_dim] = 0;
        float sum = 0.0f;
        bf16->gemm_acc(1, 1, padded / 2, do16, padded, reinterpret_cast<const std::uint32_t*>(o16), 1, &sum, 1);
        *deltas.row(b, h, i) = sum;
      } else {
        *deltas.row(b, h, i) = kernels.dot(dtype_of<Element>(), o, d_o, p.head_dim);
      }
    }
  });
}

// Q is scaled as the forward scales it (flash_forward.cpp), so the scores, and with one visible key
// P = exp(score - LSE) = 1, come out exactly as there: by softmax_scale, or not at all when softcap or
// ALiBi take the raw product. dK = dSᵀ Q · softmax_scale then needs the scale only in that case.
// With bf16 products Q stays as stored and the scores are scaled after the product, as in the
// forward's bf16 path.
float q_scale_of(const detail::AttentionProblem& p, const BackwardScratch& t) {
  return p.has_score_mod() || t.bf16 != nullptr ? 1.0f : p.softmax_scale;
}

// Loads what a query block brings to a tile: Q (times q_scale), dO, the LSE and delta.
template <typename Element>
void load_query_block(const BackwardParams& params, Deltas& deltas, int64_t b, int64_t h, int64_t m0, int64_t rows,
                      float q_scale, BackwardScratch& t) {
  load_tile<Element>(params.q, b, h, m0, rows, t.q.data());
  cpu_kernels().scale(t.q.data(), rows * params.q.shape[3], q_scale);
  load_tile<Element>(params.dout, b, h, m0, rows, t.dout.data());
  t.query_block_finite = all_finite(t.q.data(), rows * params.q.shape[3]) &&
                         all_finite(t.dout.data(), rows * params.q.shape[3]);
  if (t.bf16 != nullptr) {
    const int64_t head_dim = params.q.shape[3];
    const int64_t padded = head_dim + head_dim % 2;
    copy_rows16(params.q, b, h, m0, rows, t.q16.data(), padded);
    copy_rows16(params.dout, b, h, m0, rows, t.dout16.data(), padded);
    t.bf16->pack_rows(row_ptr<const std::uint16_t>(params.q, b, m0, h), params.q.stride[1], rows, head_dim,
                      t.qp.data(), head_dim);
    t.bf16->pack_rows(row_ptr<const std::uint16_t>(params.dout, b, m0, h), params.dout.stride[1], rows, head_dim,
                      t.doutp.data(), head_dim);
  }
  for (int64_t r = 0; r < rows; ++r) {
    t.lse[r] = lse_at(params.lse, b, h, m0 + r);
    t.delta[r] = *deltas.row(b, h, m0 + r);
  }
}

// With the query block (rows from m0) and key block (cols from n0) loaded: t.s = P, t.dp = dS, and
// t.begin, t.end / t.partly_masked describe the mask. With softcap or ALiBi (`mod`) P comes from the
// modified score and dS carries the softcap's 1 - tanh². With dropout t.s holds P Z (what dV
// needs) and dS = P (Z dP - delta) (attention.h).
void probabilities_and_dscores(const detail::AttentionProblem& p, const ScoreMod& mod, const DropoutRows& dropout,
                               int64_t m0, int64_t rows, int64_t n0, int64_t cols, BackwardScratch& t) {
  const int64_t head_dim = p.head_dim;
  const KeyRange range(p);
  const bool score_mod = p.has_score_mod();
  const CpuKernels& kernels = cpu_kernels();
  if (t.bf16 != nullptr) {
    // The bf16 products of P and dS read their column `cols` when cols is odd: it must be 0.
    std::fill(t.s.begin(), t.s.end(), 0.0f);
    std::fill(t.dp.begin(), t.dp.end(), 0.0f);
    const int64_t padded = head_dim + head_dim % 2;
    t.bf16->gemm_acc(rows, cols, padded / 2, t.q16.data(), padded, t.kt16.data(), kBlockN, t.s.data(), kBlockN);
    if (!score_mod) kernels.scale(t.s.data(), rows * kBlockN, p.softmax_scale);
    t.bf16->gemm_acc(rows, cols, padded / 2, t.dout16.data(), padded, t.vt16.data(), kBlockN, t.dp.data(), kBlockN);
  } else {
    gemm_nn(rows, cols, head_dim, t.q.data(), head_dim, t.kt.data(), kBlockN, t.s.data(), kBlockN);
    gemm_nn(rows, cols, head_dim, t.dout.data(), head_dim, t.vt.data(), kBlockN, t.dp.data(), kBlockN);
  }
  t.partly_masked = false;
  for (int64_t r = 0; r < rows; ++r) {
    float* sr = t.s.data() + r * kBlockN;
    float* dpr = t.dp.data() + r * kBlockN;
    // A row that sees no key has LSE -inf (and its P would be exp2(+inf)): it contributes nothing.
    // (A row that sees keys has a finite or NaN LSE: the forward gives NaN for all -inf scores.)
    const bool none = t.lse[r] == kNegInf;
    const int64_t begin = none ? 0 : std::clamp<int64_t>(range.key_begin(m0 + r) - n0, 0, cols);
    const int64_t end = none ? 0 : std::max(begin, std::clamp<int64_t>(range.key_end(m0 + r) - n0, 0, cols));
    if (p.has_dropout()) {
      dropout.factors(m0 + r, n0, cols, t.z.data());
      for (int64_t j = begin; j < end; ++j) dpr[j] *= t.z[j];
    }
    if (score_mod) {
      for (int64_t j = begin; j < end; ++j) {
        float dscore;
        const float score = mod(sr[j], m0 + r, n0 + j, &dscore);
        sr[j] = std::exp2((score - t.lse[r]) * kLog2e);
        dpr[j] = sr[j] * (dpr[j] - t.delta[r]) * dscore;
      }
    } else {
      kernels.probabilities_dscores(sr + begin, dpr + begin, end - begin, t.lse[r], t.delta[r]);
    }
    if (p.has_dropout()) {
      for (int64_t j = begin; j < end; ++j) sr[j] *= t.z[j];
    }
    for (int64_t j = 0; j < begin; ++j) sr[j] = dpr[j] = 0.0f;
    for (int64_t j = end; j < cols; ++j) sr[j] = dpr[j] = 0.0f;
    t.begin[r] = begin;
    t.end[r] = end;
    t.partly_masked |= begin > 0 || end < cols;
  }
}

// The key block's tiles: Kᵀ and Vᵀ for S and dP, and with `with_k` K for dQ (as floats for the
// masked products, and as bf16 pairs with bf16 products).
template <typename Element>
void load_key_block(const BackwardParams& params, int64_t b, int64_t hk, int64_t n0, int64_t cols, bool with_k,
                    BackwardScratch& t) {
  if (with_k) load_tile<Element>(params.k, b, hk, n0, cols, t.k.data());
  if (t.bf16 == nullptr) {
    load_tile_transposed<Element>(params.k, b, hk, n0, cols, t.kt.data());
    load_tile_transposed<Element>(params.v, b, hk, n0, cols, t.vt.data());
    return;
  }
  const int64_t head_dim = params.k.shape[3];
  t.bf16->pack_transposed(row_ptr<const std::uint16_t>(params.k, b, n0, hk), params.k.stride[1], cols, head_dim,
                          t.kt16.data(), kBlockN);
  t.bf16->pack_transposed(row_ptr<const std::uint16_t>(params.v, b, n0, hk), params.v.stride[1], cols, head_dim,
                          t.vt16.data(), kBlockN);
  if (with_k) {
    t.bf16->pack_rows(row_ptr<const std::uint16_t>(params.k, b, n0, hk), params.k.stride[1], cols, head_dim,
                      t.kp.data(), head_dim);
  }
}

// dQ (rows, head_dim; ld head_dim) += dS K for the loaded tiles, skipping masked entries when K is
// not all finite.
void add_dq(int64_t rows, int64_t cols, int64_t head_dim, bool k_finite, BackwardScratch& t, float* dq) {
  if (t.partly_masked && !k_finite) {
    gemm_nn_acc_visible(rows, head_dim, t.dp.data(), kBlockN, t.k.data(), head_dim, dq, head_dim, t.begin.data(),
                        t.end.data());
  } else if (t.bf16 != nullptr) {  // dS's columns past cols are 0, and so are K's padding rows
    t.bf16->round(t.dp.data(), rows * kBlockN, t.ds16.data());
    t.bf16->gemm_acc(rows, head_dim, (cols + 1) / 2, t.ds16.data(), kBlockN, t.kp.data(), head_dim, dq, head_dim);
  } else {
    gemm_nn_acc(rows, head_dim, cols, t.dp.data(), kBlockN, t.k.data(), head_dim, dq, head_dim);
  }
}

// Pass 1: dK and dV of the key block starting at row n0 of kv head hk. With dq_group (the one-pass
// scheme) it also adds this key block's dS K to the dQ accumulators of the group's query heads,
// (group, seqlen_q, head_dim) floats.
template <typename Element>
void dkdv_block(const BackwardParams& params, const detail::AttentionProblem& p, Deltas& deltas, int64_t b, int64_t hk,
                int64_t n0, BackwardScratch& t, float* dq_group = nullptr) {
  const int64_t head_dim = p.head_dim;
  const int64_t cols = std::min(kBlockN, p.seqlen_k - n0);
  const KeyRange range(p);
  load_key_block<Element>(params, b, hk, n0, cols, dq_group != nullptr, t);
  const float q_scale = q_scale_of(p, t);
  const float dk_scale = p.softmax_scale / q_scale;
  const bool k_finite = dq_group == nullptr || all_finite(t.k.data(), cols * head_dim);
  std::fill(t.dk.begin(), t.dk.end(), 0.0f);
  std::fill(t.dv.begin(), t.dv.end(), 0.0f);

  // Rows before m_first see none of these keys (right of their window), rows from m_end none either
  // (left of it): those query blocks are never touched.
  const int64_t m_first = range.first_row(n0) / kBlockM * kBlockM;
  const int64_t m_end = range.row_end(n0 + cols - 1);
  for (int64_t h = hk * p.group_size(); h < (hk + 1) * p.group_size(); ++h) {
    const ScoreMod mod(p, b, h);
    const DropoutRows dropout(p, b, h);
    for (int64_t m0 = m_first; m0 < m_end; m0 += kBlockM) {
      const int64_t rows = std::min(kBlockM, p.seqlen_q - m0);
      load_query_block<Element>(params, deltas, b, h, m0, rows, q_scale, t);
      probabilities_and_dscores(p, mod, dropout, m0, rows, n0, cols, t);
      if (t.partly_masked && !t.query_block_finite) {
        gemm_tn_acc_visible(rows, head_dim, t.s.data(), kBlockN, t.dout.data(), head_dim, t.dv.data(), head_dim,
                            t.begin.data(), t.end.data());
        gemm_tn_acc_visible(rows, head_dim, t.dp.data(), kBlockN, t.q.data(), head_dim, t.dk.data(), head_dim,
                            t.begin.data(), t.end.data());
      } else if (t.bf16 != nullptr) {  // Pᵀ dO and dSᵀ Q; the odd padding row of Pᵀ, dSᵀ is 0
        t.bf16->round_transposed(t.s.data(), kBlockN, rows, cols, t.t16.data(), kBlockM);
        t.bf16->gemm_acc(cols, head_dim, (rows + 1) / 2, t.t16.data(), kBlockM, t.doutp.data(), head_dim,
                         t.dv.data(), head_dim);
        t.bf16->round_transposed(t.dp.data(), kBlockN, rows, cols, t.t16.data(), kBlockM);
        t.bf16->gemm_acc(cols, head_dim, (rows + 1) / 2, t.t16.data(), kBlockM, t.qp.data(), head_dim, t.dk.data(),
                         head_dim);
      } else {
        gemm_tn_acc(cols, head_dim, rows, t.s.data(), kBlockN, t.dout.data(), head_dim, t.dv.data(), head_dim);
        gemm_tn_acc(cols, head_dim, rows, t.dp.data(), kBlockN, t.q.data(), head_dim, t.dk.data(), head_dim);
      }
      if (dq_group != nullptr) {  // as dq_block does for this tile
        add_dq(rows, cols, head_dim, k_finite, t, dq_group + ((h - hk * p.group_size()) * p.seqlen_q + m0) * head_dim);
      }
    }
  }
  for (int64_t c = 0; c < cols; ++c) {
    store_row(t.dk.data() + c * head_dim, head_dim, dk_scale, row_ptr<Element>(params.dk, b, n0 + c, hk));
    store_row(t.dv.data() + c * head_dim, head_dim, 1.0f, row_ptr<Element>(params.dv, b, n0 + c, hk));
  }
}

// Pass 2: dQ of the query block starting at row m0 of query head h.
template <typename Element>
void dq_block(const BackwardParams& params, const detail::AttentionProblem& p, Deltas& deltas, int64_t b, int64_t h,
              int64_t m0, BackwardScratch& t) {
  const int64_t head_dim = p.head_dim;
  const int64_t hk = h / p.group_size();
  const int64_t rows = std::min(kBlockM, p.seqlen_q - m0);
  const KeyRange range(p);
  const ScoreMod mod(p, b, h);
  const DropoutRows dropout(p, b, h);
  load_query_block<Element>(params, deltas, b, h, m0, rows, q_scale_of(p, t), t);
  std::fill(t.dq.begin(), t.dq.end(), 0.0f);

  const int64_t key_end = range.key_end(m0 + rows - 1);
  for (int64_t n0 = range.key_begin(m0) / kBlockN * kBlockN; n0 < key_end; n0 += kBlockN) {
    const int64_t cols = std::min(kBlockN, key_end - n0);
    load_key_block<Element>(params, b, hk, n0, cols, true, t);
    probabilities_and_dscores(p, mod, dropout, m0, rows, n0, cols, t);
    add_dq(rows, cols, head_dim, all_finite(t.k.data(), cols * head_dim), t, t.dq.data());
  }
  for (int64_t r = 0; r < rows; ++r) {
    store_row(t.dq.data() + r * head_dim, head_dim, p.softmax_scale, row_ptr<Element>(params.dq, b, m0 + r, h));
  }
}

// The one-pass scheme for kv head hk of batch b: every key block in order, then dQ of the group.
template <typename Element>
void head_backward(const BackwardParams& params, const detail::AttentionProblem& p, Deltas& deltas, int64_t b,
                   int64_t hk, BackwardScratch& t, std::vector<float>& dq_group) {
  std::fill(dq_group.begin(), dq_group.end(), 0.0f);
  for (int64_t n0 = 0; n0 < p.seqlen_k; n0 += kBlockN) dkdv_block<Element>(params, p, deltas, b, hk, n0, t, dq_group.data());
  for (int64_t g = 0; g < p.group_size(); ++g) {
    const int64_t h = hk * p.group_size() + g;
    for (int64_t i = 0; i < p.seqlen_q; ++i) {
      store_row(dq_group.data() + (g * p.seqlen_q + i) * p.head_dim, p.head_dim, p.softmax_scale,
                row_ptr<Element>(params.dq, b, i, h));
    }
  }
}

// Whether the one-pass scheme serves this problem with `workers` threads: at least one (batch, kv
// head) task per worker, and dQ accumulators of at most 64 MiB a worker.
bool one_pass(const detail::AttentionProblem& p, int workers) {
  const int64_t dq_bytes = static_cast<int64_t>(sizeof(float)) * p.group_size() * p.seqlen_q * p.head_dim;
  return p.batch * p.heads_kv >= workers && dq_bytes <= (int64_t{64} << 20);
}

int64_t dkdv_tasks_of(const detail::AttentionProblem& p) {
  return p.batch * p.heads_kv * ceil_div(p.seqlen_k, kBlockN);
}
int64_t dq_tasks_of(const detail::AttentionProblem& p) { return p.batch * p.heads_q * ceil_div(p.seqlen_q, kBlockM); }

template <typename Element>
void run_backward(const BackwardParams& params, const detail::AttentionProblem& p) {
  Deltas deltas{p, std::vector<float>(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q))};
  compute_deltas<Element>(params, p, deltas);

  const int64_t m_blocks = ceil_div(p.seqlen_q, kBlockM);
  const int64_t dkdv_tasks = dkdv_tasks_of(p);
  const int64_t dq_tasks = dq_tasks_of(p);
  const int workers = worker_count(params.num_threads, std::max(dkdv_tasks, dq_tasks));
  std::vector<BackwardScratch> scratch(static_cast<size_t>(workers),
                                      BackwardScratch(p.head_dim, bf16_products<Element>()));

  if (one_pass(p, workers)) {
    std::vector<std::vector<float>> dq_groups(
        static_cast<size_t>(workers), std::vector<float>(static_cast<size_t>(p.group_size() * p.seqlen_q * p.head_dim)));
    const int64_t tasks = p.batch * p.heads_kv;
    parallel_for(tasks, workers, [&](int64_t task, int worker) {
      head_backward<Element>(params, p, deltas, task / p.heads_kv, task % p.heads_kv,
                             scratch[static_cast<size_t>(worker)], dq_groups[static_cast<size_t>(worker)]);
    });
    return;
  }

  // With causal, early key blocks and late query blocks have the most work: every head's are
  // handed out first, so the short tasks fill the gaps at the end.
  const int64_t kv_heads = p.batch * p.heads_kv;
  parallel_for(dkdv_tasks, worker_count(workers, dkdv_tasks), [&](int64_t task, int worker) {
    const int64_t n_block = task / kv_heads;
    const int64_t bh = task % kv_heads;
    dkdv_block<Element>(params, p, deltas, bh / p.heads_kv, bh % p.heads_kv, n_block * kBlockN,
                        scratch[static_cast<size_t>(worker)]);
  });
  const int64_t q_heads = p.batch * p.heads_q;
  parallel_for(dq_tasks, worker_count(workers, dq_tasks), [&](int64_t task, int worker) {
    const int64_t m_block = m_blocks - 1 - task / q_heads;
    const int64_t bh = task % q_heads;
    dq_block<Element>(params, p, deltas, bh / p.heads_q, bh % p.heads_q, m_block * kBlockM,
                      scratch[static_cast<size_t>(worker)]);
  });
}

}  // namespace

std::size_t flash_backward_scratch_bytes(const detail::AttentionProblem& problem, int num_threads) {
  const int workers = worker_count(num_threads, std::max(dkdv_tasks_of(problem), dq_tasks_of(problem)));
  const std::size_t deltas =
      sizeof(float) * static_cast<std::size_t>(problem.batch * problem.heads_q * problem.seqlen_q);
  const Bf16Kernels* bf16 = problem.dtype == DType::kBFloat16 ? cpu_kernels().bf16 : nullptr;
  std::size_t per_worker = BackwardScratch(problem.head_dim, bf16).bytes();
  if (one_pass(problem, workers)) {
    per_worker += sizeof(float) * static_cast<std::size_t>(problem.group_size() * problem.seqlen_q * problem.head_dim);
  }
  return static_cast<std::size_t>(workers) * per_worker + deltas;
}

Status flash_backward(const BackwardParams& params, const detail::AttentionProblem& problem) {
  try {
    dispatch_element(problem.dtype, [&](auto tag) { run_backward<decltype(tag)>(params, problem); });
  } catch (const std::bad_alloc&) {
    return Status::Internal("flashcore::backward: out of host memory for the CPU backend's tiles");
  }
  return Status::Ok();
}

}  // namespace flashcore::cpu
