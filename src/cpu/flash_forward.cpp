// CPU flash forward: one task per (batch, query head, block of kForwardBlockM query rows) sweeps
// the keys in blocks of kBlockN with an online softmax (running max and sum, rescaling the
// accumulator when the max grows), so no seqlen_q x seqlen_k matrix exists. Arithmetic is float32; each worker's
// extra memory is its tiles, O(block x head_dim).
//
// Non-finite inputs follow the plain formula (attention.h): a NaN or +inf score, or a row whose
// every visible score is -inf, makes the row's output and LSE NaN; an infinity in v reaches the
// rows whose probabilities weight it. The hot loop pays nothing for this: the running sum carries
// a NaN by itself, NaN is looked for only in the rare all -inf branch, and only the v tiles of
// partly masked blocks are scanned for non-finite values (masked_products.h says why).
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

// 512 query rows a task (the backward keeps flash_tile.h's 256): each converted, transposed key tile
// then serves twice the rows, 2-5% faster non-causal in fp32 (docs/tuning/cpu.md, v9). At head_dim
// 128 a worker's q, s and acc tiles are 256 KiB each, still within a Zen 4 core's 1 MiB L2. A key
// tile's products run only over the rows that see one of its keys, so under a causal mask the
// bigger block wastes no more work on the diagonal than a 128-row one would.
constexpr int64_t kForwardBlockM = 512;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// One worker's tiles: the float ones, or with bf16 products (kernels.h: Bf16Kernels) the bf16 ones
// (and v, for the rare partly masked tile with a non-finite value), never both, so a worker's
// tiles stay under ~1 MiB at head_dim 128.
struct ForwardScratch {
  ForwardScratch(int64_t head_dim, bool bf16_products)
      : q(bf16_products ? 0 : kForwardBlockM * head_dim),
        kt(bf16_products ? 0 : head_dim * kBlockN),
        v(kBlockN * head_dim),
        s(kForwardBlockM * kBlockN),
        acc(kForwardBlockM * head_dim),
        row_max(kForwardBlockM),
        row_sum(kForwardBlockM),
        begin(kForwardBlockM),
        end(kForwardBlockM),
        z(kBlockN),
        q16(bf16_products ? kForwardBlockM * (head_dim + head_dim % 2) : 0),
        k16(bf16_products ? (head_dim + 1) / 2 * kBlockN : 0),
        v16(bf16_products ? kBlockN / 2 * head_dim : 0),
        p16(bf16_products ? kForwardBlockM * kBlockN : 0) {}
  std::size_t bytes() const {
    return sizeof(float) * (q.size() + kt.size() + v.size() + s.size() + acc.size() + row_max.size() + row_sum.size() +
                            z.size()) +
           sizeof(int64_t) * (begin.size() + end.size()) + sizeof(std::uint16_t) * (q16.size() + p16.size()) +
           sizeof(std::uint32_t) * (k16.size() + v16.size());
  }
  std::vector<float> q;        // (kForwardBlockM, head_dim), pre-scaled by softmax_scale
  std::vector<float> kt;       // (head_dim, kBlockN)
  std::vector<float> v;        // (kBlockN, head_dim)
  std::vector<float> s;        // (kForwardBlockM, kBlockN): scores, then probabilities
  std::vector<float> acc;      // (kForwardBlockM, head_dim): unnormalised output
  std::vector<float> row_max;  // (kForwardBlockM): running max of each row's scores
  std::vector<float> row_sum;  // (kForwardBlockM): running sum of exp(score - row_max)
  std::vector<int64_t> begin;  // (kForwardBlockM): the current key tile's columns [begin, end) each row sees
  std::vector<int64_t> end;
  std::vector<float> z;        // (kBlockN): one row's dropout factors (cpu/dropout.h)
  // bf16 inputs on a CPU with bf16 products use these instead of q and kt:
  std::vector<std::uint16_t> q16;  // (kForwardBlockM, head_dim rounded up to even): Q as stored, not scaled
  std::vector<std::uint32_t> k16;  // (head_dim / 2, kBlockN) pairs: Kᵀ
  std::vector<std::uint32_t> v16;  // (kBlockN / 2, head_dim) pairs: V
  std::vector<std::uint16_t> p16;  // (kForwardBlockM, kBlockN): P rounded to bf16, as the GPU kernels round it
};

// Rows of a bf16 view as raw 16-bit values.
template <typename Element>
const std::uint16_t* bits_of(const TensorView& t, int64_t i0, int64_t i1, int64_t i2) {
  return reinterpret_cast<const std::uint16_t*>(row_ptr<const Element>(t, i0, i1, i2));
}

// Folds the score tile's rows [r_lo, r_hi) into the running max and sum, turns the scores into
// probabilities and rescales the accumulator rows whose max grew.
void online_softmax(ForwardScratch& t, int64_t r_lo, int64_t r_hi, int64_t cols, int64_t head_dim) {
  const CpuKernels& kernels = cpu_kernels();
  for (int64_t r = r_lo; r < r_hi; ++r) {
    float* sr = t.s.data() + r * kBlockN;
    const float block_max = kernels.max(sr, cols);
    // std::max skips a NaN score (NaN compares false), but then exp2(NaN - max) makes the sum NaN,
    // and so the row's output and LSE. Once row_max is NaN it stays so (std::max keeps its first
    // argument), and every later block's correction and probabilities are NaN too.
    const float new_max = std::max(t.row_max[r], block_max);
    if (new_max == kNegInf) {  // no finite score yet: masked keys, -inf scores or NaN ones
      // -inf - -inf would be NaN: these keys get probability 0, unless one of them is NaN, which
      // only this rare branch has to look for.
      if (std::any_of(sr, sr + cols, [](float x) { return std::isnan(x); })) {
        t.row_max[r] = kNaN;
        t.row_sum[r] = kNaN;
      }
      std::fill(sr, sr + cols, 0.0f);
      continue;
    }
    const float correction = std::exp2((t.row_max[r] - new_max) * kLog2e);  // 0 on the row's first visible block
    const float sum = kernels.exp_sum(sr, cols, new_max);
    t.row_sum[r] = t.row_sum[r] * correction + sum;
    t.row_max[r] = new_max;
    if (correction != 1.0f) kernels.scale(t.acc.data() + r * head_dim, head_dim, correction);
  }
}

template <typename Element>
void forward_block(const ForwardParams& params, const detail::AttentionProblem& p, int64_t b, int64_t h, int64_t m0,
                   ForwardScratch& t) {
  const int64_t head_dim = p.head_dim;
  const int64_t hk = h / p.group_size();
  const int64_t rows = std::min(kForwardBlockM, p.seqlen_q - m0);
  const KeyRange range(p);
  const bool score_mod = p.has_score_mod();
  const ScoreMod mod(p, b, h);
  const DropoutRows dropout(p, b, h);
  // fp32 V is a float tile already: the P·V product reads it where it is stored, with its row
  // stride, instead of copying it (a copy was ~4% of the fp32 forward).
  constexpr bool kVInPlace = std::is_same_v<Element, float>;

  // Q pre-scaled, so a product is the score. The backward forms its scores the same way, so with
  // one visible key its P = exp(score - LSE) is exactly 1. With softcap or ALiBi the products stay
  // raw and the score options turn them into scores.
  // bf16 on a CPU with bf16 products: tiles stay bf16 and the scores are scaled after the product.
  const CpuKernels& kernels = cpu_kernels();
  const Bf16Kernels* dp = nullptr;
  if constexpr (std::is_same_v<Element, cutlass::bfloat16_t>) dp = kernels.bf16;
  const int64_t q16_ld = head_dim + head_dim % 2;
  if (dp != nullptr) {
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(t.q16.data() + r * q16_ld, bits_of<Element>(params.q, b, m0 + r, h), sizeof(std::uint16_t) * head_dim);
      if (q16_ld != head_dim) t.q16[r * q16_ld + head_dim] = 0;
    }
  } else {
    load_tile<Element>(params.q, b, h, m0, rows, t.q.data());
    kernels.scale(t.q.data(), rows * head_dim, score_mod ? 1.0f : p.softmax_scale);
  }
  std::fill(t.acc.begin(), t.acc.end(), 0.0f);
  std::fill(t.row_max.begin(), t.row_max.end(), kNegInf);
  std::fill(t.row_sum.begin(), t.row_sum.end(), 0.0f);

  // The block's first row sees the earliest key, its last row the last one; key blocks wholly
  // outside the window are never touched.
  const int64_t key_end = range.key_end(m0 + rows - 1);
  for (int64_t n0 = range.key_begin(m0) / kBlockN * kBlockN; n0 < key_end; n0 += kBlockN) {
    const int64_t cols = std::min(kBlockN, key_end - n0);
    // Each row sees the keys [begin, end) of this tile. The rows that see any, [r_lo, r_hi), are
    // contiguous (key_range.h: both bounds grow with the row); the others would only get
    // probability 0 and leave their running max, sum and accumulator as they are, so the tile's
    // products and softmax skip them.
    int64_t r_lo = rows, r_hi = 0;
    for (int64_t r = 0; r < rows; ++r) {
      t.begin[r] = std::clamp<int64_t>(range.key_begin(m0 + r) - n0, 0, cols);
      t.end[r] = std::max(t.begin[r], std::clamp<int64_t>(range.key_end(m0 + r) - n0, 0, cols));
      if (t.begin[r] < t.end[r]) {
        r_lo = std::min(r_lo, r);
        r_hi = r + 1;
      }
    }
    if (r_lo >= r_hi) continue;
    const int64_t live = r_hi - r_lo;
    float* s_live = t.s.data() + r_lo * kBlockN;
    float* acc_live = t.acc.data() + r_lo * head_dim;
    if (dp != nullptr) {
      // The bf16 P·V product reads P's column `cols` when cols is odd: it must be 0.
      std::fill(s_live, s_live + live * kBlockN, 0.0f);
      dp->pack_transposed(bits_of<Element>(params.k, b, n0, hk), params.k.stride[1], cols, head_dim, t.k16.data(),
                          kBlockN);
      dp->pack_rows(bits_of<Element>(params.v, b, n0, hk), params.v.stride[1], cols, head_dim, t.v16.data(), head_dim);
      dp->gemm_acc(live, cols, q16_ld / 2, t.q16.data() + r_lo * q16_ld, q16_ld, t.k16.data(), kBlockN, s_live,
                   kBlockN);
      if (!score_mod) kernels.scale(s_live, live * kBlockN, p.softmax_scale);
    } else {
      load_tile_transposed<Element>(params.k, b, hk, n0, cols, t.kt.data());
      if (!kVInPlace) load_tile<Element>(params.v, b, hk, n0, cols, t.v.data());
      gemm_nn(live, cols, head_dim, t.q.data() + r_lo * head_dim, head_dim, t.kt.data(), kBlockN, s_live, kBlockN);
    }
    if (score_mod) {
      for (int64_t r = r_lo; r < r_hi; ++r) {
        float dscore;
        float* sr = t.s.data() + r * kBlockN;
        for (int64_t j = 0; j < cols; ++j) sr[j] = mod(sr[j], m0 + r, n0 + j, &dscore);
      }
    }
    bool partly_masked = false;
    for (int64_t r = r_lo; r < r_hi; ++r) {  // keys outside this row's window
      partly_masked |= t.begin[r] > 0 || t.end[r] < cols;
      float* sr = t.s.data() + r * kBlockN;
      std::fill(sr, sr + t.begin[r], kNegInf);
      std::fill(sr + t.end[r], sr + cols, kNegInf);
    }
    online_softmax(t, r_lo, r_hi, cols, head_dim);
    if (p.has_dropout()) {  // after the row sums: the softmax normalises the probabilities before dropout
      for (int64_t r = r_lo; r < r_hi; ++r) {
        float* sr = t.s.data() + r * kBlockN;
        dropout.factors(m0 + r, n0, cols, t.z.data());
        for (int64_t j = 0; j < cols; ++j) sr[j] *= t.z[j];
      }
    }
    if (partly_masked && (dp != nullptr || kVInPlace)) load_tile<Element>(params.v, b, hk, n0, cols, t.v.data());
    if (partly_masked && !all_finite(t.v.data(), cols * head_dim)) {
      gemm_nn_acc_visible(live, head_dim, s_live, kBlockN, t.v.data(), head_dim, acc_live, head_dim,
                          t.begin.data() + r_lo, t.end.data() + r_lo);
    } else if (dp != nullptr) {  // P's columns past cols are 0, and so are V's padding rows
      std::uint16_t* p16_live = t.p16.data() + r_lo * kBlockN;
      dp->round(s_live, live * kBlockN, p16_live);
      dp->gemm_acc(live, head_dim, (cols + 1) / 2, p16_live, kBlockN, t.v16.data(), head_dim, acc_live, head_dim);
    } else if (kVInPlace) {
      gemm_nn_acc(live, head_dim, cols, s_live, kBlockN, row_ptr<const float>(params.v, b, n0, hk),
                  params.v.stride[1], acc_live, head_dim);
    } else {
      gemm_nn_acc(live, head_dim, cols, s_live, kBlockN, t.v.data(), head_dim, acc_live, head_dim);
    }
  }

  for (int64_t r = 0; r < rows; ++r) {
    Element* out = row_ptr<Element>(params.out, b, m0 + r, h);
    float out_scale = 1.0f / t.row_sum[r];  // NaN when the row met a NaN or +inf score
    float lse = t.row_max[r] + std::log(t.row_sum[r]);
    if (range.sees_none(m0 + r)) {  // FlashAttention's convention for a row that sees no key
      out_scale = 0.0f;
      lse = kNegInf;
      std::fill(t.acc.begin() + r * head_dim, t.acc.begin() + (r + 1) * head_dim, 0.0f);
    } else if (t.row_max[r] == kNegInf) {  // every visible score is -inf: the formula's 0 / 0
      out_scale = kNaN;
      lse = kNaN;
    }
    store_row(t.acc.data() + r * head_dim, head_dim, out_scale, out);
    if (params.lse.present()) lse_at(params.lse, b, h, m0 + r) = lse;
  }
}

// Whether this problem's tiles are bf16 (bf16 inputs on a CPU with bf16 products).
bool bf16_products(const detail::AttentionProblem& p) {
  return p.dtype == DType::kBFloat16 && cpu_kernels().bf16 != nullptr;
}

int64_t forward_tasks(const detail::AttentionProblem& p) {
  return p.batch * p.heads_q * ceil_div(p.seqlen_q, kForwardBlockM);
}

template <typename Element>
void run_forward(const ForwardParams& params, const detail::AttentionProblem& p) {
  const int64_t m_blocks = ceil_div(p.seqlen_q, kForwardBlockM);
  const int64_t tasks = forward_tasks(p);
  const int workers = worker_count(params.num_threads, tasks);
  std::vector<ForwardScratch> scratch(static_cast<size_t>(workers), ForwardScratch(p.head_dim, bf16_products(p)));
  const int64_t heads = p.batch * p.heads_q;
  parallel_for(tasks, workers, [&](int64_t task, int worker) {
    // The last query blocks of every head first: with causal they see the most keys, and starting
    // the longest tasks first leaves the short ones to fill the gaps at the end.
    const int64_t m_block = m_blocks - 1 - task / heads;
    const int64_t bh = task % heads;
    forward_block<Element>(params, p, bh / p.heads_q, bh % p.heads_q, m_block * kForwardBlockM,
                           scratch[static_cast<size_t>(worker)]);
  });
}

}  // namespace

std::size_t flash_forward_scratch_bytes(const detail::AttentionProblem& problem, int num_threads) {
  const int workers = worker_count(num_threads, forward_tasks(problem));
  return static_cast<std::size_t>(workers) * ForwardScratch(problem.head_dim, bf16_products(problem)).bytes();
}

Status flash_forward(const ForwardParams& params, const detail::AttentionProblem& problem) {
  try {
    dispatch_element(problem.dtype, [&](auto tag) { run_forward<decltype(tag)>(params, problem); });
  } catch (const std::bad_alloc&) {
    return Status::Internal("flashcore::forward: out of host memory for the CPU backend's tiles");
  }
  return Status::Ok();
}

}  // namespace flashcore::cpu
