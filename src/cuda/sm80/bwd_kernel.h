// The sm80 backward kernel (FlashAttention-2's recomputation scheme): one CTA owns a kBlockN-row
// block of keys of one (batch, kv head) and sweeps the query blocks that see it, for every query
// head of the kv head's group, so dK and dV are summed over the group in registers (GQA/MQA
// without atomics on dK/dV).
//
//   prologue   K, V and the first Q, dO tiles in flight (cp.async)
//   mainloop   for each (query head of the group, query block that sees the key block: with a
//              sliding window only those in [m_block_min, m_block_max), common/mask.h):
//                S  = Q Kᵀ, dP = dO Vᵀ      tensor cores, operands by ldmatrix from smem
//                P  = exp2(S scale log2e - LSE log2e), masked entries 0   (recomputed, not stored)
//                     (kScoreMod: S through softcap/ALiBi first, common/score_mod.h; the
//                     window exists only in the kWindow and kScoreMod kernels)
//                dS = P (dP - D)                       (times 1 - tanh² with softcap)
//                     (kScoreMod, a uniform branch: dropout's Z, common/dropout.h, drawn again:
//                      dP *= Z before, P *= keep after, so dS = P (Z dP - D) and dV = (P keep)ᵀ dO
//                      times 1 / (1 - p) once, before the epilogue)
//                P, dS -> smem                the next products read them transposed
//                dV += Pᵀ dO                  fp32 accumulators live across the whole loop
//                dQ_partial = dS K  -> added into the fp32 workspace (sm90: per-warp bulk
//                                      reduce-add from smem; sm80: atomics), converted at the end
//                dK += dSᵀ Q                  while the dQ partial drains
//              (d <= 64 computes dQ first, before dV; the mainloop says why)
//              while the next Q, dO and their rows' LSE and D load (double-buffered; d=256
//              single-buffers them and loads during dQ).
//   epilogue   dK * scale, dV through smem to 16-byte global stores (rows past seqlen_k skipped).
//
// dS here is the gradient with respect to the scaled scores scale * S: dQ and dK carry the
// factor softmax_scale, applied once at the end.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/sm80/copy.h"
#include "cuda/common/dropout.h"
#include "cuda/common/epilogue.h"
#include "cuda/common/fragment.h"
#include "cuda/common/kernel_variant.h"
#include "cuda/sm80/gemm.h"
#include "cuda/common/softmax.h"  // fast_exp2
#include "cuda/sm80/bwd_dq_accum.h"
#include "cuda/sm80/bwd_epilogue.h"
#include "cuda/common/mask.h"
#include "cuda/common/score_mod.h"
#include "cuda/common/seqlen.h"
#include "cuda/params.h"

namespace flashcore::cuda::sm80 {

template <class Traits, bool kIsCausal, KernelVariant kVariant>
__global__ void __launch_bounds__(Traits::kNThreads, 1) bwd_kernel(const __grid_constant__ BwdParams params) {
  using namespace cute;
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr int kHeadDim = Traits::kHeadDim;
  constexpr int kStages = Traits::kStages;
  constexpr int kQdOElems = Traits::kSmemQdOElems;

  extern __shared__ __align__(128) char smem[];
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int kv_head = blockIdx.y;
  const int batch = blockIdx.z;
  const SeqlenInfo seq(params, batch);  // varlen: this sequence's lengths and first rows
  const int n_blocks = (seq.seqlen_k + kBlockN - 1) / kBlockN;  // varlen: CTAs past it have nothing to do
  const int m_blocks = (seq.seqlen_q + kBlockM - 1) / kBlockM;
  // Kernels without the window see none: the query-block bounds and compares fold to the causal ones.
  constexpr bool kWindow = has_window(kVariant);
  constexpr bool kScoreMod = has_score_mod(kVariant);
  const AttentionMask mask{seq.seqlen_q, seq.seqlen_k, kIsCausal, kWindow ? params.window_left : -1,
                           kWindow ? params.window_right : -1};
  float* dq_accum = params.dq_accum + (params.deterministic ? blockIdx.x * params.dq_accum_split_stride : 0);


  // Shared memory: Q[kStages], dO[kStages], K, V, P, dS, then the query block's lse_log2 and D
  // rows (fp32, kBlockM each, kStages buffers), loaded with Q so no register holds them across
  // the products; on sm90 then the dQ staging runs (kBlockM x kHeadDim fp32, one run per warp).
  Element* smem_q = reinterpret_cast<Element*>(smem);
  Element* smem_do = smem_q + kStages * kQdOElems;
  Element* smem_k = smem_do + kStages * kQdOElems;
  Element* smem_v = smem_k + Traits::kSmemKVElems;
  Element* smem_p = smem_v + Traits::kSmemKVElems;
  Element* smem_ds = smem_p + Traits::kSmemPdSElems;
  float* smem_lse = reinterpret_cast<float*>(smem_ds + Traits::kSmemPdSElems);
  float* smem_dsum = smem_lse + kStages * kBlockM;
  float* smem_dq_stage = smem_dsum + kStages * kBlockM;
  auto sQ_at = [&](int stage) { return make_tensor(make_smem_ptr(smem_q + stage * kQdOElems), typename Traits::SmemLayoutQdO{}); };
  auto sdO_at = [&](int stage) { return make_tensor(make_smem_ptr(smem_do + stage * kQdOElems), typename Traits::SmemLayoutQdO{}); };
  auto sQt_at = [&](int stage) { return make_tensor(make_smem_ptr(smem_q + stage * kQdOElems), typename Traits::SmemLayoutQdOt{}); };
  auto sdOt_at = [&](int stage) { return make_tensor(make_smem_ptr(smem_do + stage * kQdOElems), typename Traits::SmemLayoutQdOt{}); };
  Tensor sK = make_tensor(make_smem_ptr(smem_k), typename Traits::SmemLayoutKV{});     // (kBlockN, kHeadDim)
  Tensor sV = make_tensor(make_smem_ptr(smem_v), typename Traits::SmemLayoutKV{});     // (kBlockN, kHeadDim)
  Tensor sKt = make_tensor(make_smem_ptr(smem_k), typename Traits::SmemLayoutKt{});    // (kHeadDim, kBlockN)
  Tensor sP = make_tensor(make_smem_ptr(smem_p), typename Traits::SmemLayoutPdS{});    // (kBlockM, kBlockN)
  Tensor sdS = make_tensor(make_smem_ptr(smem_ds), typename Traits::SmemLayoutPdS{});  // (kBlockM, kBlockN)
  Tensor sPt = make_tensor(make_smem_ptr(smem_p), typename Traits::SmemLayoutPdSt{});  // (kBlockN, kBlockM)
  Tensor sdSt = make_tensor(make_smem_ptr(smem_ds), typename Traits::SmemLayoutPdSt{});  // (kBlockN, kBlockM)
  // Shape-only views for the register fragments of the transposed operands.
  Tensor sQdOtNoSwizzle = make_tensor(smem_q, typename Traits::SmemLayoutQdOtNoSwizzle{});  // (kHeadDim, kBlockM)
  Tensor sKtNoSwizzle = make_tensor(smem_k, typename Traits::SmemLayoutKtNoSwizzle{});      // (kHeadDim, kBlockN)
  Tensor sPdStNoSwizzle = make_tensor(smem_p, typename Traits::SmemLayoutPdStNoSwizzle{});  // (kBlockN, kBlockM)

  // Global -> shared copies; identity tensors give each element's (row, col) for the predicates.
  typename Traits::GmemTiledCopyLoad gmem_tiled_copy;
  auto gmem_thr_copy = gmem_tiled_copy.get_thread_slice(tid);
  Tensor tQcQ = gmem_thr_copy.partition_S(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  Tensor tKVcKV = gmem_thr_copy.partition_S(make_identity_tensor(Shape<Int<kBlockN>, Int<kHeadDim>>{}));

  // Tensor-core partitions of the three products.
  typename Traits::TiledMmaSdP tiled_mma_sdp;
  typename Traits::TiledMmadKV tiled_mma_dkv;
  typename Traits::TiledMmadQ tiled_mma_dq;
  auto thr_mma_sdp = tiled_mma_sdp.get_thread_slice(tid);
  auto thr_mma_dkv = tiled_mma_dkv.get_thread_slice(tid);
  auto thr_mma_dq = tiled_mma_dq.get_thread_slice(tid);
  Tensor tSrQ = thr_mma_sdp.partition_fragment_A(sQ_at(0));         // (MMA, MMA_M, MMA_K=d)
  Tensor tSrK = thr_mma_sdp.partition_fragment_B(sK);               // (MMA, MMA_N, MMA_K=d)
  Tensor tdPrdO = thr_mma_sdp.partition_fragment_A(sdO_at(0));      // (MMA, MMA_M, MMA_K=d)
  Tensor tdPrV = thr_mma_sdp.partition_fragment_B(sV);              // (MMA, MMA_N, MMA_K=d)
  Tensor tdVrPt = thr_mma_dkv.partition_fragment_A(sPdStNoSwizzle);  // (MMA, MMA_N, MMA_K=kBlockM)
  Tensor tdVrdOt = thr_mma_dkv.partition_fragment_B(sQdOtNoSwizzle);  // (MMA, MMA_d, MMA_K=kBlockM)
  Tensor tdKrdSt = thr_mma_dkv.partition_fragment_A(sPdStNoSwizzle);  // (MMA, MMA_N, MMA_K=kBlockM)
  Tensor tdKrQt = thr_mma_dkv.partition_fragment_B(sQdOtNoSwizzle);   // (MMA, MMA_d, MMA_K=kBlockM)
  Tensor tdQrdS = thr_mma_dq.partition_fragment_A(sdS);               // (MMA, MMA_M, MMA_K=kBlockN)
  Tensor tdQrKt = thr_mma_dq.partition_fragment_B(sKtNoSwizzle);      // (MMA, MMA_d, MMA_K=kBlockN)
  Tensor acc_dk = partition_fragment_C(tiled_mma_dkv, Shape<Int<kBlockN>, Int<kHeadDim>>{});  // (MMA, MMA_N, MMA_d)
  Tensor acc_dv = partition_fragment_C(tiled_mma_dkv, Shape<Int<kBlockN>, Int<kHeadDim>>{});  // (MMA, MMA_N, MMA_d)

  // Shared -> register copies (ldmatrix) matching each product's operand partitions.
  auto smem_copy_qdo = make_tiled_copy_A(typename Traits::SmemCopyAtom{}, tiled_mma_sdp);
  auto smem_copy_kv = make_tiled_copy_B(typename Traits::SmemCopyAtom{}, tiled_mma_sdp);
  auto smem_copy_pdst = make_tiled_copy_A(typename Traits::SmemCopyAtomTransposed{}, tiled_mma_dkv);
  auto smem_copy_qdot = make_tiled_copy_B(typename Traits::SmemCopyAtomTransposed{}, tiled_mma_dkv);
  auto smem_copy_ds = make_tiled_copy_A(typename Traits::SmemCopyAtom{}, tiled_mma_dq);
  auto smem_copy_kt = make_tiled_copy_B(typename Traits::SmemCopyAtomTransposed{}, tiled_mma_dq);
  auto thr_copy_qdo = smem_copy_qdo.get_thread_slice(tid);
  auto thr_copy_qdot = smem_copy_qdot.get_thread_slice(tid);
  Tensor tSsK = smem_copy_kv.get_thread_slice(tid).partition_S(sK);
  Tensor tdPsV = smem_copy_kv.get_thread_slice(tid).partition_S(sV);
  Tensor tdVsPt = smem_copy_pdst.get_thread_slice(tid).partition_S(sPt);
  Tensor tdKsdSt = smem_copy_pdst.get_thread_slice(tid).partition_S(sdSt);
  Tensor tdQsdS = smem_copy_ds.get_thread_slice(tid).partition_S(sdS);
  Tensor tdQsKt = smem_copy_kt.get_thread_slice(tid).partition_S(sKt);
  // Accumulator fragments -> shared memory (P and dS).
  auto smem_copy_pds = make_tiled_copy_C(typename Traits::SmemCopyAtomStore{}, tiled_mma_sdp);
  auto smem_thr_copy_pds = smem_copy_pds.get_thread_slice(tid);
  Tensor tPsP = smem_thr_copy_pds.partition_D(sP);
  Tensor tdSsdS = smem_thr_copy_pds.partition_D(sdS);

  // Which rows and columns of the S tile this thread holds, as (rows, cols).
  Tensor tScS = thr_mma_sdp.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{}));
  Tensor tScS_rc = make_tensor(tScS.data(), accumulator_as_rows_cols(tScS.layout()));
  constexpr int kRows = decltype(size<0>(tScS_rc))::value;
  constexpr int kCols = decltype(size<1>(tScS_rc))::value;

  const auto* q_base = static_cast<const Element*>(params.q) + batch * params.q_strides.batch + seq.row_q * params.q_strides.row;
  const auto* do_base =
      static_cast<const Element*>(params.dout) + batch * params.do_strides.batch + seq.row_q * params.do_strides.row;
  const int rows_per_head = params.seqlen_q_rounded;

  // Q, dO, lse_log2 and D of (query head, query block) into buffer `stage`; rows past seqlen_q
  // and columns past head_dim are zero-filled (the padded lse_log2 and D rows need no check).
  auto load_q_do = [&](int head, int m_block, int stage) {
    const std::int64_t row0 = static_cast<std::int64_t>(m_block) * kBlockM;
    constexpr int kStatThreads = kBlockM / 4;  // 16-byte copies of 4 floats
    static_assert(2 * kStatThreads <= Traits::kNThreads);
    if (tid < 2 * kStatThreads) {
      const bool is_lse = tid < kStatThreads;
      const int i = (is_lse ? tid : tid - kStatThreads) * 4;
      const std::int64_t stat_offset = (static_cast<std::int64_t>(batch) * params.heads_q + head) * rows_per_head + row0 + i;
      const float* src = (is_lse ? params.lse_log2 : params.dsum) + stat_offset;
      float* dst = (is_lse ? smem_lse : smem_dsum) + stage * kBlockM + i;
      SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>::copy(*reinterpret_cast<const uint128_t*>(src), *reinterpret_cast<uint128_t*>(dst));
    }
    Tensor gQ = make_tensor(make_gmem_ptr(q_base + head * params.q_strides.head + row0 * params.q_strides.row),
                            Shape<Int<kBlockM>, Int<kHeadDim>>{}, make_stride(params.q_strides.row, _1{}));
    Tensor gdO = make_tensor(make_gmem_ptr(do_base + head * params.do_strides.head + row0 * params.do_strides.row),
                             Shape<Int<kBlockM>, Int<kHeadDim>>{}, make_stride(params.do_strides.row, _1{}));
    const int rows_left = seq.seqlen_q - m_block * kBlockM;
    cp_async_tile_zero_fill(gmem_thr_copy.partition_S(gQ), gmem_thr_copy.partition_D(sQ_at(stage)), tQcQ, rows_left,
                            params.head_dim);
    cp_async_tile_zero_fill(gmem_thr_copy.partition_S(gdO), gmem_thr_copy.partition_D(sdO_at(stage)), tQcQ, rows_left,
                            params.head_dim);
  };

  // Deterministic mode loops over several key blocks (one dq_accum slice per CTA); otherwise the
  // grid has one CTA per key block and this loop runs once.
  for (int n_block = blockIdx.x; n_block < n_blocks; n_block += gridDim.x) {
    const int n0 = n_block * kBlockN;
    const int m_block_min = mask.m_block_min(n0, kBlockM);
    const int m_block_max = mask.m_block_max(n0, kBlockN, kBlockM, m_blocks);  // m_blocks without a left bound
    const int m_count = max(m_block_max - m_block_min, 0);
    const int n_iters = params.group_size * m_count;
    const int rows_k = seq.seqlen_k - n0;

    if (n_block != static_cast<int>(blockIdx.x)) __syncthreads();  // the last epilogue is done with sK, sV
    {
      const std::int64_t k_offset =
          batch * params.k_strides.batch + kv_head * params.k_strides.head + (seq.row_k + n0) * params.k_strides.row;
      const std::int64_t v_offset =
          batch * params.v_strides.batch + kv_head * params.v_strides.head + (seq.row_k + n0) * params.v_strides.row;
      Tensor gK = make_tensor(make_gmem_ptr(static_cast<const Element*>(params.k) + k_offset),
                              Shape<Int<kBlockN>, Int<kHeadDim>>{}, make_stride(params.k_strides.row, _1{}));
      Tensor gV = make_tensor(make_gmem_ptr(static_cast<const Element*>(params.v) + v_offset),
                              Shape<Int<kBlockN>, Int<kHeadDim>>{}, make_stride(params.v_strides.row, _1{}));
      cp_async_tile_zero_fill(gmem_thr_copy.partition_S(gK), gmem_thr_copy.partition_D(sK), tKVcKV, rows_k,
                              params.head_dim);
      cp_async_tile_zero_fill(gmem_thr_copy.partition_S(gV), gmem_thr_copy.partition_D(sV), tKVcKV, rows_k,
                              params.head_dim);
    }
    // Each key block starts its sweep at a different query block (and wraps around), so the CTAs
    // of one head do not all add into the same dQ tile at once: +1-4% (tuning log v6).
    const int m_first = m_count > 0 ? m_block_min + n_block % m_count : m_block_min;
    if (n_iters > 0) load_q_do(kv_head * params.group_size, m_first, 0);
    cp_async_fence();
    clear(acc_dk);
    clear(acc_dv);

    int head = kv_head * params.group_size;
    int m_block = m_first;
    int block_in_head = 0;
    for (int it = 0; it < n_iters; ++it) {
      const int m0 = m_block * kBlockM;
      const int stage = kStages == 2 ? it % 2 : 0;
      // The (head, query block) of the next iteration: query blocks inner, heads of the group outer.
      const bool last_block_of_head = block_in_head + 1 == m_count;
      const int next_head = last_block_of_head ? head + 1 : head;
      const int next_m_block = last_block_of_head ? m_first : (m_block + 1 == m_block_max ? m_block_min : m_block + 1);

      cp_async_wait<0>();
      __syncthreads();  // Q, dO of this stage (and K, V) landed; every warp is done with the last iteration
      if constexpr (kStages == 2) {
        if (it + 1 < n_iters) {
          load_q_do(next_head, next_m_block, stage ^ 1);
          cp_async_fence();
        }
      }

      // One (head, query block) pair; kMasked is a compile-time tag so that the tiles needing no
      // mask (all but the ragged last key block and, causal, the diagonal) carry no mask code. The
      // tag wraps the whole iteration, not just the elementwise step: around that step alone the
      // compiler if-converts both versions into one predicated stream, and every iteration then
      // issues the masked path's FSEL and a second FMUL per element (tuning log v7).
      // always_inline: the score-mod kernels' larger body otherwise stays a call, and the fragments
      // it takes by reference go to local memory (a 3 KB stack frame at d = 64).
      auto process_query_block = [&](auto masked_tag) __attribute__((always_inline)) {
        constexpr bool kMasked = decltype(masked_tag)::value;
        // ALiBi's slope is per query head: read (from L1) once per tile.
        [[maybe_unused]] const float alibi_slope = kScoreMod ? ScoreMod::slope(params, batch, head) : 0.0f;
        Tensor acc_s = partition_fragment_C(tiled_mma_sdp, Shape<Int<kBlockM>, Int<kBlockN>>{});   // (MMA, MMA_M, MMA_N)
        Tensor acc_dp = partition_fragment_C(tiled_mma_sdp, Shape<Int<kBlockM>, Int<kBlockN>>{});  // (MMA, MMA_M, MMA_N)
        clear(acc_s);
        clear(acc_dp);
        gemm_smem_smem(tiled_mma_sdp, acc_s, tSrQ, tSrK, thr_copy_qdo.partition_S(sQ_at(stage)), tSsK, smem_copy_qdo,
                       smem_copy_kv, tid);
        gemm_smem_smem(tiled_mma_sdp, acc_dp, tdPrdO, tdPrV, thr_copy_qdo.partition_S(sdO_at(stage)), tdPsV,
                       smem_copy_qdo, smem_copy_kv, tid);

        // P = exp2(S scale log2e - LSE log2e) and dS = P (dP - D), both in the S fragment layout.
        // Score-option kernels: S in score units (softcap's tanh, or q·k), ALiBi's bias subtracted per
        // element, 1 - tanh² from the capped score (score_mod.h).
        if constexpr (kScoreMod) ScoreMod::cap(params, acc_s);
        Tensor scores = make_tensor(acc_s.data(), accumulator_as_rows_cols(acc_s.layout()));  // (rows, cols)
        Tensor dp = make_tensor(acc_dp.data(), accumulator_as_rows_cols(acc_dp.layout()));    // (rows, cols)
        const float* lse_log2 = smem_lse + stage * kBlockM;
        const float* dsum = smem_dsum + stage * kBlockM;
        [[maybe_unused]] const float score_scale_log2 = kScoreMod ? params.score_unit_log2 : params.scale_log2;
        // 1 with a softcap, 0 without: dscore = 1 - capped² * this, no branch per element.
        [[maybe_unused]] const float tanh_weight = params.softcap > 0.0f ? 1.0f : 0.0f;
        [[maybe_unused]] const ScoreMod::Distance distance(mask.diagonal(), tScS, m0, n0);
        // Dropout: the keep bits of this tile's entries, one bit each (attention.h).
        [[maybe_unused]] std::uint32_t keep[(kRows * kCols + 31) / 32];
        if constexpr (kScoreMod) {
          if (params.has_dropout) {  // dP *= Z (1 / (1 - p) or 0); the bits again for P below
            const TileDropout dropout(params, batch, head);
            dropout.mask_and_keep_bits<16 * Traits::kAtomMSdP, 8 * (Traits::kNWarps / Traits::kAtomMSdP), kRows,
                                       kCols>(acc_dp, params.dropout_scale, keep, m0 + get<0>(tScS_rc(0, 0)),
                                              n0 + get<1>(tScS_rc(0, 0)));
          }
        }
        CUTE_UNROLL
        for (int r = 0; r < kRows; ++r) {
          const int row = get<0>(tScS_rc(r, 0));
          const float row_lse_log2 = lse_log2[row];
          const float row_dsum = dsum[row];
          CUTE_UNROLL
          for (int c = 0; c < kCols; ++c) {
            // <= about 0; -inf for rows without keys (lse_log2 = +inf), where ex2 gives +0.
            float p;
            [[maybe_unused]] float dscore = 1.0f;
            if constexpr (kScoreMod) {
              const float capped = scores(r, c);
              const float score = fmaf(-alibi_slope, distance.abs_at(tScS_rc, r, c), capped);
              p = fast_exp2(score * score_scale_log2 - row_lse_log2);
              dscore = fmaf(-capped * capped, tanh_weight, 1.0f);
            } else {
              p = fast_exp2(scores(r, c) * params.scale_log2 - row_lse_log2);
            }
            if constexpr (kMasked) {
              if (!mask.visible(m0 + row, n0 + get<1>(tScS_rc(r, c)))) p = 0.0f;
            }
            scores(r, c) = p;
            if constexpr (kScoreMod) {
              dp(r, c) = p * (dp(r, c) - row_dsum) * dscore;
            } else {
              dp(r, c) = p * (dp(r, c) - row_dsum);
            }
          }
        }
        if constexpr (kScoreMod) {  // P *= keep for dV; its 1 / (1 - p) goes onto dV once, at the end
          if (params.has_dropout) TileDropout::apply<kRows, kCols>(scores, keep, 1.0f);
        }
        Tensor rP = convert_fragment<Element>(acc_s);
        Tensor rdS = convert_fragment<Element>(acc_dp);
        copy(smem_copy_pds, smem_thr_copy_pds.retile_S(rP), tPsP);
        copy(smem_copy_pds, smem_thr_copy_pds.retile_S(rdS), tdSsdS);
        __syncthreads();  // P and dS visible to every warp

        auto dv_product = [&] {
          gemm_smem_smem(tiled_mma_dkv, acc_dv, tdVrPt, tdVrdOt, tdVsPt, thr_copy_qdot.partition_S(sdOt_at(stage)),
                         smem_copy_pdst, smem_copy_qdot, tid);
        };
        auto dk_product = [&] {
          gemm_smem_smem(tiled_mma_dkv, acc_dk, tdKrdSt, tdKrQt, tdKsdSt, thr_copy_qdot.partition_S(sQt_at(stage)),
                         smem_copy_pdst, smem_copy_qdot, tid);
        };
        auto dq_product = [&] {
          Tensor acc_dq = partition_fragment_C(tiled_mma_dq, Shape<Int<kBlockM>, Int<kHeadDim>>{});  // (MMA, MMA_M, MMA_d)
          clear(acc_dq);
          gemm_smem_smem(tiled_mma_dq, acc_dq, tdQrdS, tdQrKt, tdQsdS, tdQsKt, smem_copy_ds, smem_copy_kt, tid);
          DqAccumulate::add(acc_dq, dq_accum + dq_accum_tile_offset<kHeadDim>(params, batch, head, m0), smem_dq_stage, warp,
                         lane);
        };
        if constexpr (kStages == 1) {
          dv_product();
          // Q and dO have one buffer: finish reading Q (dK) first, then load the next block
          // during dQ, which reads only dS and K.
          dk_product();
          if (it + 1 < n_iters) {
            __syncthreads();  // every warp is done reading Q and dO
            load_q_do(next_head, next_m_block, 0);
            cp_async_fence();
          }
          dq_product();
        } else {
          // dQ before dK: its partial drains while dK runs (tuning log v4, v6). At d <= 64 dQ also
          // goes before dV (+1-4% there, -1-2% at d = 128; v6).
          if constexpr (kHeadDim <= 64) {
            dq_product();
            dv_product();
          } else {
            dv_product();
            dq_product();
          }
          dk_product();
        }
      };
      if (mask.tile_needs_mask(m0, n0, kBlockM, kBlockN)) {
        process_query_block(cute::true_type{});
      } else {
        process_query_block(cute::false_type{});
      }
      head = next_head;
      m_block = next_m_block;
      block_in_head = last_block_of_head ? 0 : block_in_head + 1;
    }

    // Epilogue: dK (times the softmax scale) and dV through K's and V's smem tiles.
    DqAccumulate::drain(lane);  // deterministic mode: the next key block adds to the same tiles
    cp_async_wait<0>();
    __syncthreads();  // every warp is done reading sK, sV
    if constexpr (kScoreMod) {
      if (params.has_dropout) {  // dV = (P Z)ᵀ dO with P masked above: Z's 1 / (1 - p) here, once
        CUTE_UNROLL
        for (int i = 0; i < size(acc_dv); ++i) acc_dv(i) *= params.dropout_scale;
      }
    }
    store_dk_dv<Traits>(params, seq, acc_dk, acc_dv, tiled_mma_dkv, sK, sV, batch, kv_head, n0, tid);
  }
}

}  // namespace flashcore::cuda::sm80
