// The backward mainloop of one key block (n_block, kv_head, batch).
//
// load() runs in the producer's elected thread: K and V once (barrier_kv), then for every query
// head of the CTA's share of the kv head's group (all of it unless kv_splits > 1) and every query block that sees the key block, Q with its lse_log2
// row (pipeline_q) and dO with its dsum row (pipeline_do), by TMA and bulk copy on the stage's
// full barrier.
//
// mma() runs in every consumer thread; per query block (consumer step):
//   1. Sᵀ = K Qᵀ and dPᵀ = V dOᵀ issued back to back (SS).
//   2. Pᵀ = exp2(Sᵀ scale_log2 - lse_log2) (masked tiles only: invisible pairs to 0) once Sᵀ is
//      done, under dPᵀ.
//   3. dSᵀ = Pᵀ ∘ (dPᵀ - dsum).
//   4. dV += Pᵀ dO issued (RS), dSᵀ stored to smem (this step's buffer), fence, dS-ready barrier.
//   5. dK += dSᵀ Q (RS) and dQ = dS K (SS) issued; all retired; Q and dO stages released.
//   6. dQ partial added into dq_accum: each warp stages its fragment and one lane issues a bulk
//      reduce-add (bwd_dq_accum.h; in deterministic mode ordered between key blocks), or, with
//      Traits::kDqWriter, the warps stage it and the producer warpgroup's writer warp sends the
//      whole tile (bwd_dq_writer.h).
//   (Traits::kDqFirst: dQ is issued before dK and step 6 runs while dK is in flight.)
//   (Traits::kDropout: the step's keep bits are drawn under step 1's products and step 3 is
//   dSᵀ = Pᵀ ∘ (Zᵀ ∘ dPᵀ - D), Pᵀ ∘ keep going to dV, dV / (1 - p) at the end: bwd_dropout.h.)
//   (Traits::kScoreOptions: the window's query-block range and mask, softcap and ALiBi in steps
//   2-3: bwd_score_options.h.)
#pragma once

#include <cmath>

#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "cuda/common/mask.h"
#include "cuda/common/softmax.h"  // fast_exp2
#include "cuda/sm90/bwd_dq_accum.h"
#include "cuda/sm90/bwd_dq_writer.h"
#include "cuda/sm90/bwd_dropout.h"
#include "cuda/sm90/bwd_named_barrier.h"
#include "cuda/sm90/bwd_score_options.h"
#include "cuda/sm90/bwd_sequence.h"
#include "cuda/sm90/bwd_tile_order.h"
#include "cuda/sm90/fragment.h"
#include "cuda/sm90/pipeline.h"
#include "cuda/sm90/wgmma.h"

namespace flashcore::cuda::sm90 {

// A key block of the CTA and the query range it sweeps. A CTA owns key blocks first_n_block,
// first_n_block + gridDim.x, ... of its sequence (BwdWork, bwd_sequence.h): one in the default grid,
// several in deterministic mode (gridDim.x = dq_accum slices).
struct BwdBlock {
  int iteration;  // key blocks this CTA handled before (the phase of barrier_kv / barrier_kv_empty)
  int n_block;
  int kv_head;
  int batch;
  int seqlen_q;  // the sequence's own lengths (varlen; the call's otherwise)
  int seqlen_k;
  int row_q;      // its first rows in the packed tensors (varlen; 0 otherwise), for the producer
  int row_k;
  int tma_batch;  // the TMA tensors' batch coordinate (batch; 0 varlen)
  int m_block_min;
  int m_block_max;
  int head_begin;  // the query heads this CTA sweeps: the kv head's group, or its share of it
  int head_end;    //   when kv_splits CTAs of a cluster split the group (bwd_cluster_reduce.h)
};

template <class Traits>
struct BwdMainloop {
  using Element = typename Traits::Element;
  using Params = typename Traits::Params;
  using SharedStorage = typename Traits::SharedStorage;
  using Pipeline = TmaPipeline<Traits::kStages>;
  using State = typename Pipeline::State;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  using Dropout = BwdDropout<kBlockM>;
  using ScoreOptions = BwdScoreOptions<kBlockM, kBlockN, Params>;
  // Pᵀ's exponentials as one MUFU instruction each (softmax.h's fast_exp2) instead of exp2f's
  // range fix-ups (3 more instructions each), except at d64: there the 128 x 128 tile holds 224
  // accumulator registers a consumer thread, and ptxas spilled 4-100 B in its consumers with
  // fast_exp2 (0 B with exp2f; nvcc 13.0, session 11).
  static constexpr bool kFastExp2 = kHeadDim > 64;
  __forceinline__ __device__ static float exp2_of(float x) {
    if constexpr (kFastExp2) {
      return fast_exp2(x);
    } else {
      return exp2f(x);
    }
  }

  // The mask of the block's sequence (causal bottom-right per sequence when varlen).
  __forceinline__ __device__ static AttentionMask mask_of(BwdBlock const& blk) {
    return AttentionMask{blk.seqlen_q, blk.seqlen_k, Traits::kIsCausal};
  }
  // With the sliding window in the score-option kernels (the others: mask_of(blk)).
  __forceinline__ __device__ static AttentionMask mask_of(Params const& params, BwdBlock const& blk) {
    if constexpr (Traits::kScoreOptions) {
      return AttentionMask{blk.seqlen_q, blk.seqlen_k, Traits::kIsCausal, params.window_left, params.window_right};
    } else {
      return mask_of(blk);
    }
  }
  // The call's mask (dense calls; the d > 128 kernels).
  __forceinline__ __device__ static AttentionMask mask_of(Params const& params) {
    return AttentionMask{params.seqlen_q, params.seqlen_k, Traits::kIsCausal};
  }
  // Dense calls' grid (the d > 128 kernels).
  __forceinline__ __device__ static BwdBlock block_of(Params const& params, int iteration) {
    // Block 0 sweeps the most query blocks when causal: launched first.
    return block_at(params, iteration, blockIdx.x + iteration * gridDim.x, blockIdx.y, blockIdx.z);
  }

  // The d <= 128 kernels' grid: the CTA's work (BwdWork: a dense call's batch, or a varlen
  // call's sequence and its key blocks).
  __forceinline__ __device__ static BwdBlock block_of(Params const& params, BwdWork const& work, int iteration) {
    if constexpr (Traits::kTailLongestFirst) {  // the causal default mode's dense grid (launch_bwd_kernel)
      if (params.tail_units > 0) {
        const BwdTileCoord c = bwd_tile_tail_longest_first(int(blockIdx.x), int(blockIdx.y), int(blockIdx.z),
                                                           int(gridDim.x), int(gridDim.y), int(gridDim.z),
                                                           params.tail_units, params.kv_splits);
        return block_at(params, iteration, c.n_block, c.y, c.batch);
      }
    }
    return block_at(params, iteration, work.first_n_block + iteration * gridDim.x, blockIdx.y, work.batch);
  }

  // Key block n_block of grid row y (kv head * kv_splits + the CTA's share of its group) and batch
  // (a varlen call's sequence); block_of's coordinates, or a reordered grid's (bwd_tile_order.h).
  __forceinline__ __device__ static BwdBlock block_at(Params const& params, int iteration, int n_block, int y,
                                                      int batch) {
    BwdBlock b;
    b.iteration = iteration;
    b.n_block = n_block;
    b.kv_head = y / params.kv_splits;
    b.batch = batch;
    const BwdSequence seq(params, batch);
    b.seqlen_q = seq.seqlen_q;
    b.seqlen_k = seq.seqlen_k;
    b.row_q = seq.row_q;
    b.row_k = seq.row_k;
    b.tma_batch = seq.tma_batch;
    const int heads_per_cta = params.group_size / params.kv_splits;
    b.head_begin = b.kv_head * params.group_size + (y % params.kv_splits) * heads_per_cta;
    b.head_end = b.head_begin + heads_per_cta;
    b.m_block_min = mask_of(params, b).m_block_min(b.n_block * kBlockN, kBlockM);
    b.m_block_max = (b.seqlen_q + kBlockM - 1) / kBlockM;
    if constexpr (Traits::kScoreOptions) {  // the window's left edge: the last query block that sees the keys
      b.m_block_max = mask_of(params, b).m_block_max(b.n_block * kBlockN, kBlockN, kBlockM, b.m_block_max);
    }
    return b;
  }

  // Row offset of (batch, query head) in lse_log2, dsum and dq_accum (rows of seqlen_q_rounded;
  // varlen: batch is the sequence, its rows padded like a dense call's).
  __forceinline__ __device__ static int64_t row_stat_offset(Params const& params, int batch, int head) {
    return (static_cast<int64_t>(batch) * params.heads_q + head) * params.seqlen_q_rounded;
  }

  // Producer. q_state and do_state carry over from the CTA's previous key block.
  __forceinline__ __device__ static void load(Params const& params, SharedStorage& shared, BwdBlock const& blk,
                                              State& q_state, State& do_state) {
    using namespace cute;
    Pipeline pipeline_q{shared.pipeline_q};
    Pipeline pipeline_do{shared.pipeline_do};
    Tensor sQ = make_tensor(make_smem_ptr(shared.q.data()), typename Traits::SmemLayoutQ{});     // (M, d, stage)
    Tensor sdO = make_tensor(make_smem_ptr(shared.d_o.data()), typename Traits::SmemLayoutQ{});  // (M, d, stage)
    Tensor sK = make_tensor(make_smem_ptr(shared.k.data()), typename Traits::SmemLayoutK{});     // (N, d)
    Tensor sV = make_tensor(make_smem_ptr(shared.v.data()), typename Traits::SmemLayoutK{});     // (N, d)

    // Varlen: the sequence's slices of the packed tensors (bwd_sequence.h).
    Tensor mK = domain_offset(make_coord(blk.row_k, _0{}),
                              params.tma_k.get_tma_tensor(params.shape_k)(_, _, blk.kv_head, blk.tma_batch));  // (seqlen_k, d)
    Tensor mV = domain_offset(make_coord(blk.row_k, _0{}),
                              params.tma_v.get_tma_tensor(params.shape_k)(_, _, blk.kv_head, blk.tma_batch));  // (seqlen_k, d)
    Tensor gK = local_tile(mK, Shape<Int<kBlockN>, Int<kHeadDim>>{}, make_coord(blk.n_block, _0{}));  // (N, d)
    Tensor gV = local_tile(mV, Shape<Int<kBlockN>, Int<kHeadDim>>{}, make_coord(blk.n_block, _0{}));  // (N, d)
    auto [tKgK, tKsK] = tma_partition(params.tma_k, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sK),
                                      group_modes<0, 2>(gK));  // (TMA), (TMA)
    auto [tVgV, tVsV] = tma_partition(params.tma_v, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sV),
                                      group_modes<0, 2>(gV));  // (TMA), (TMA)
    // K and V's buffers are free once every consumer warp has finished the previous key block.
    if (blk.iteration > 0) cutlass::arch::ClusterBarrier::wait(&shared.barrier_kv_empty, (blk.iteration - 1) & 1);
    cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&shared.barrier_kv, 2 * Traits::kBytesKV);
    copy(params.tma_k.with(shared.barrier_kv), tKgK, tKsK);
    copy(params.tma_v.with(shared.barrier_kv), tVgV, tVsV);

    for (int head = blk.head_begin; head < blk.head_end; ++head) {
      Tensor mQ = domain_offset(make_coord(blk.row_q, _0{}),
                                params.tma_q.get_tma_tensor(params.shape_q)(_, _, head, blk.tma_batch));  // (seqlen_q, d)
      Tensor mdO = domain_offset(make_coord(blk.row_q, _0{}),
                                 params.tma_do.get_tma_tensor(params.shape_q)(_, _, head, blk.tma_batch));  // (seqlen_q, d)
      Tensor gQ = local_tile(mQ, Shape<Int<kBlockM>, Int<kHeadDim>>{}, make_coord(_, _0{}));    // (M, d, m)
      Tensor gdO = local_tile(mdO, Shape<Int<kBlockM>, Int<kHeadDim>>{}, make_coord(_, _0{}));  // (M, d, m)
      auto q_parts = tma_partition(params.tma_q, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
      auto do_parts = tma_partition(params.tma_do, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sdO), group_modes<0, 2>(gdO));
      Tensor tQgQ = get<0>(q_parts);     // (TMA, m)
      Tensor tQsQ = get<1>(q_parts);     // (TMA, stage)
      Tensor tdOgdO = get<0>(do_parts);  // (TMA, m)
      Tensor tdOsdO = get<1>(do_parts);  // (TMA, stage)
      const int64_t stat_offset = row_stat_offset(params, blk.batch, head);
      // Not unrolled: the producer runs at 24 registers (bwd_traits.h), and ptxas's unrolled copies
      // of this loop kept their stage addresses live and spilled them (40-168 B of local memory
      // per kernel at d128, device run 11); one iteration a consumer step costs nothing rolled.
#pragma unroll 1
      for (int m = blk.m_block_min; m < blk.m_block_max; ++m) {
        uint64_t& q_full = pipeline_q.producer_acquire(q_state, Traits::kBytesQ + Traits::kBytesRowStat);
        copy(params.tma_q.with(q_full), tQgQ(_, m), tQsQ(_, q_state.index));
        SM90_BULK_COPY_G2S::copy(params.lse_log2 + stat_offset + m * kBlockM, &q_full,
                                 shared.lse_log2.data() + q_state.index * kBlockM, Traits::kBytesRowStat);
        q_state.advance();
        uint64_t& do_full = pipeline_do.producer_acquire(do_state, Traits::kBytesQ + Traits::kBytesRowStat);
        copy(params.tma_do.with(do_full), tdOgdO(_, m), tdOsdO(_, do_state.index));
        SM90_BULK_COPY_G2S::copy(params.dsum + stat_offset + m * kBlockM, &do_full,
                                 shared.dsum.data() + do_state.index * kBlockM, Traits::kBytesRowStat);
        do_state.advance();
      }
    }
  }

  // Step 6: the dQ partial to dq_accum, by the consumer warps' own bulk reduce-adds or through the
  // dQ writer warp (Traits::kDqWriter; then the writer knows the tile's address).
  template <class Acc>
  __forceinline__ __device__ static void add_dq(Acc const& tdQrdQ, float* dq_tile, SharedStorage& shared, int warp,
                                                int lane) {
    if constexpr (Traits::kDqWriter) {
      BwdDqWriter<Traits>::stage(tdQrdQ, shared.dq_stage.data(), warp, lane);
    } else {
      dq_bulk_add(tdQrdQ, dq_tile, shared.dq_stage.data(), warp, lane);
    }
  }

  // Consumer: on return tdVrdV and tdKrdK hold dV and dK / softmax_scale of the warpgroup's keys.
  // The pipeline states and the dS buffer index carry over from the CTA's previous key block.
  template <class FragKV>
  __forceinline__ __device__ static void mma(Params const& params, SharedStorage& shared, BwdBlock const& blk,
                                             int thread_idx, State& q_state, State& do_state, int& ds_buf,
                                             FragKV& tdVrdV, FragKV& tdKrdK) {
    using namespace cute;
    Pipeline pipeline_q{shared.pipeline_q};
    Pipeline pipeline_do{shared.pipeline_do};
    Tensor sQ = make_tensor(make_smem_ptr(shared.q.data()), typename Traits::SmemLayoutQ{});       // (M, d, stage)
    Tensor sdO = make_tensor(make_smem_ptr(shared.d_o.data()), typename Traits::SmemLayoutQ{});    // (M, d, stage)
    Tensor sQt = make_tensor(make_smem_ptr(shared.q.data()), typename Traits::SmemLayoutQt{});     // (d, M, stage)
    Tensor sdOt = make_tensor(make_smem_ptr(shared.d_o.data()), typename Traits::SmemLayoutQt{});  // (d, M, stage)
    Tensor sK = make_tensor(make_smem_ptr(shared.k.data()), typename Traits::SmemLayoutK{});       // (N, d)
    Tensor sV = make_tensor(make_smem_ptr(shared.v.data()), typename Traits::SmemLayoutK{});       // (N, d)
    Tensor sKt = make_tensor(make_smem_ptr(shared.k.data()), typename Traits::SmemLayoutKt{});     // (d, N)
    Tensor sdS = make_tensor(make_smem_ptr(shared.ds.data()), typename Traits::SmemLayoutdS{});    // (M, N, buf)
    Tensor sdSt = make_tensor(make_smem_ptr(shared.ds.data()), typename Traits::SmemLayoutdSt{});  // (N, M, buf)

    typename Traits::TiledMmaSdP mma_sdp;
    typename Traits::TiledMmadKV mma_dkv;
    typename Traits::TiledMmadQ mma_dq;
    auto thr_sdp = mma_sdp.get_thread_slice(thread_idx);
    auto thr_dkv = mma_dkv.get_thread_slice(thread_idx);
    auto thr_dq = mma_dq.get_thread_slice(thread_idx);
    Tensor tSrK = thr_sdp.partition_fragment_A(sK);       // (MMA, MMA_N, MMA_d) descriptors
    Tensor tSrQ = thr_sdp.partition_fragment_B(sQ);       // (MMA, MMA_M, MMA_d, stage)
    Tensor tdPrV = thr_sdp.partition_fragment_A(sV);      // (MMA, MMA_N, MMA_d)
    Tensor tdPrdO = thr_sdp.partition_fragment_B(sdO);    // (MMA, MMA_M, MMA_d, stage)
    Tensor tdVrdOt = thr_dkv.partition_fragment_B(sdOt);  // (MMA, MMA_d, MMA_M, stage)
    Tensor tdKrQt = thr_dkv.partition_fragment_B(sQt);    // (MMA, MMA_d, MMA_M, stage)
    Tensor tdQrdS = thr_dq.partition_fragment_A(sdS);     // (MMA, MMA_M, MMA_N, buf)
    Tensor tdQrKt = thr_dq.partition_fragment_B(sKt);     // (MMA, MMA_d, MMA_N)
    Tensor tdSsdS = thr_sdp.partition_C(sdSt);            // (MMA, MMA_N, MMA_M, buf): where dSᵀ goes

    Tensor tSrS = partition_fragment_C(mma_sdp, typename Traits::ShapeSdP{});    // (MMA, MMA_N, MMA_M) Sᵀ
    Tensor tdPrdP = partition_fragment_C(mma_sdp, typename Traits::ShapeSdP{});  // (MMA, MMA_N, MMA_M) dPᵀ
    Tensor tdQrdQ = partition_fragment_C(mma_dq, typename Traits::ShapedQ{});    // (MMA, MMA_M, MMA_d)
    Tensor tScS = thr_sdp.partition_C(make_identity_tensor(typename Traits::ShapeSdP{}));  // (key, query)
    // Pᵀ and dSᵀ in the register-A layout of the dV and dK products, in Sᵀ's element order.
    Tensor tdVrP = make_tensor<Element>(wgmma_acc_as_a_operand(tSrS.layout()));   // ((2,2,2), MMA_N, M/16)
    Tensor tdKrdS = make_tensor<Element>(wgmma_acc_as_a_operand(tSrS.layout()));  // ((2,2,2), MMA_N, M/16)
    Tensor tdSrdS = make_tensor(tdKrdS.data(), tSrS.layout());                    // the same, accumulator-shaped

    const AttentionMask mask = mask_of(blk);  // the option kernels' window: ScoreOptions's
    const int n0 = blk.n_block * kBlockN;
    const int warp = thread_idx / 32;
    const int lane = thread_idx % 32;
    // Deterministic mode: this CTA column's own slice (its adds ordered by bwd_kernel.h's drain
    // between key blocks: bwd_dq_accum.h).
    float* dq_accum = params.dq_accum + (params.deterministic ? blockIdx.x * params.dq_accum_split_stride : 0);

    clear(tdVrdV);
    clear(tdKrdK);
    cutlass::arch::ClusterTransactionBarrier::wait(&shared.barrier_kv, blk.iteration & 1);

    for (int head = blk.head_begin; head < blk.head_end; ++head) {
      const int64_t stat_offset = row_stat_offset(params, blk.batch, head);
      [[maybe_unused]] const ScoreOptions score_options(params, mask, blk.batch, head, Traits::kScoreOptions);
      for (int m = blk.m_block_min; m < blk.m_block_max; ++m) {
        const int m0 = m * kBlockM;
        pipeline_q.consumer_wait(q_state);
        wgmma_gemm</*zero*/ true, /*wait*/ -1, /*regA*/ false>(mma_sdp, tSrK, tSrQ(_, _, _, q_state.index), tSrS);
        pipeline_do.consumer_wait(do_state);
        wgmma_gemm<true, -1, false>(mma_sdp, tdPrV, tdPrdO(_, _, _, do_state.index), tdPrdP);

        // ---- dropout (kDropout kernels): this step's keep bits, drawn while Sᵀ and dPᵀ run.
        [[maybe_unused]] std::uint32_t keep[Dropout::kBitWords];
        if constexpr (Traits::kDropout) {
          const Dropout dropout(params, blk.batch, head);
          const int wg = thread_idx / 128;
          std::uint32_t* words = shared.dropout_words.data() + wg * Dropout::kWords;
          dropout.draw(words, m0, n0, wg, thread_idx % 128);
          cutlass::arch::NamedBarrier::sync(128, int(BwdNamedBarrier::kDropoutWords) + wg);
          dropout.read(words, warp % 4, lane, keep);
        }
        // ---- end dropout

        // Pᵀ, under dPᵀ. Masked pairs get -inf before exp2 (so 0 whatever lse_log2 is); rows
        // past seqlen_q have lse_log2 = +inf and come out 0 without a mask.
        float const* lse = shared.lse_log2.data() + q_state.index * kBlockM;
        warpgroup_wait<1>();
        warpgroup_fence_operand(tSrS);
        if constexpr (Traits::kScoreOptions) {  // ---- score options: Pᵀ, or with a softcap the capped scores
          score_options.scores(tSrS, tScS, lse, m0, n0, [](float x) { return exp2_of(x); });
        } else if (mask.tile_needs_mask(m0, n0, kBlockN)) {
          CUTE_UNROLL
          for (int i = 0; i < size(tSrS); ++i) {
            const int key = get<0>(tScS(i)), query = get<1>(tScS(i));
            const float x = tSrS(i) * params.scale_log2 - lse[query];
            tSrS(i) = exp2_of(mask.visible(m0 + query, n0 + key) ? x : -INFINITY);
          }
        } else {
          CUTE_UNROLL
          for (int i = 0; i < size(tSrS); ++i) tSrS(i) = exp2_of(tSrS(i) * params.scale_log2 - lse[get<1>(tScS(i))]);
        }
        if constexpr (!Traits::kDropout && !Traits::kScoreOptions) convert_into(tSrS, tdVrP);

        // dSᵀ = Pᵀ ∘ (dPᵀ - D).
        float const* dsum = shared.dsum.data() + do_state.index * kBlockM;
        warpgroup_wait<0>();
        warpgroup_fence_operand(tdPrdP);
        if constexpr (Traits::kScoreOptions) {  // ---- score options: dSᵀ (and with a softcap Pᵀ)
          score_options.gradients(tSrS, tdPrdP, tScS, lse, dsum, m0, n0, [](float x) { return exp2_of(x); });
          convert_into(tSrS, tdVrP);
        } else if constexpr (Traits::kDropout) {  // ---- dropout: dSᵀ = Pᵀ ∘ (Zᵀ ∘ dPᵀ - D); Pᵀ ∘ keep to dV
          Dropout(params, blk.batch, head).apply(keep, tSrS, tdPrdP, [&](int i) { return dsum[get<1>(tScS(i))]; });
          convert_into(tSrS, tdVrP);
        } else {
          CUTE_UNROLL
          for (int i = 0; i < size(tdPrdP); ++i) tdPrdP(i) = tSrS(i) * (tdPrdP(i) - dsum[get<1>(tScS(i))]);
        }
        convert_into(tdPrdP, tdKrdS);

        wgmma_gemm<false, -1, true>(mma_dkv, tdVrP, tdVrdOt(_, _, _, do_state.index), tdVrdV);

        // dSᵀ -> smem (queries contiguous), visible to the tensor cores of both warpgroups.
        if constexpr (Traits::kDsStsm) {
          // Keys are fragment rows and queries (contiguous in sdSᵀ) its columns: 8 x 8 matrices
          // of 16-byte rows, the non-transposed stmatrix.
          auto smem_tiled_copy_dS = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, Element>{}, mma_sdp);
          auto smem_thr_copy_dS = smem_tiled_copy_dS.get_thread_slice(thread_idx);
          Tensor tdSsdS_stsm = smem_thr_copy_dS.partition_D(sdSt);  // (CPY, CPY_N, CPY_M, buf)
          Tensor tdSrdS_stsm = smem_thr_copy_dS.retile_S(tdSrdS);   // (CPY, CPY_N, CPY_M)
          cute::copy(smem_tiled_copy_dS, tdSrdS_stsm, tdSsdS_stsm(_, _, _, ds_buf));
        } else {
          Tensor tdSsdS_buf = tdSsdS(_, _, _, ds_buf);
          CUTE_UNROLL
          for (int i = 0; i < size(tdSrdS); ++i) tdSsdS_buf(i) = tdSrdS(i);
        }
        cutlass::arch::fence_view_async_shared();
        named_barrier_sync(Traits::kConsumerThreads, BwdNamedBarrier::kDsReady);

        float* dq_tile = dq_accum + (stat_offset + m0) * kHeadDim;
        Tensor tdQrdS_buf = tdQrdS(_, _, _, ds_buf);
        if constexpr (Traits::kDqFirst) {
          // dQ before dK: once dQ (and dV) have retired, this step's dQ partial is staged and
          // handed to the copy engine while dK is still on the tensor cores.
          wgmma_gemm<true, -1, false>(mma_dq, tdQrdS_buf, tdQrKt, tdQrdQ);
          wgmma_gemm<false, /*wait*/ 1, true>(mma_dkv, tdKrdS, tdKrQt(_, _, _, q_state.index), tdKrdK);
          warpgroup_fence_operand(tdQrdQ);
          add_dq(tdQrdQ, dq_tile, shared, warp, lane);
          warpgroup_wait<0>();
        } else {
          wgmma_gemm<false, -1, true>(mma_dkv, tdKrdS, tdKrQt(_, _, _, q_state.index), tdKrdK);
          wgmma_gemm<true, 0, false>(mma_dq, tdQrdS_buf, tdQrKt, tdQrdQ);
        }
        warpgroup_fence_operand(tdVrdV);
        warpgroup_fence_operand(tdKrdK);
        warpgroup_fence_operand(tdVrP);  // the RS products have retired: their A registers are free
        warpgroup_fence_operand(tdKrdS);
        // Every thread arrives, not one lane per warp (TmaPipeline::consumer_release): an mbarrier
        // arrive releases only the arriving thread's own accesses, and each thread has read this
        // stage's lse_log2 / dsum rows with plain loads (the tiles only wgmma reads). So the
        // producer's next bulk copy into the stage is ordered after every read, without relying
        // on the warp's lockstep (a __syncwarp here compiles to a NOP, which compute-sanitizer's
        // racecheck cannot see).
        cutlass::arch::ClusterBarrier::arrive(&shared.pipeline_q.empty[q_state.index]);
        cutlass::arch::ClusterBarrier::arrive(&shared.pipeline_do.empty[do_state.index]);
        q_state.advance();
        do_state.advance();
        ds_buf ^= 1;

        if constexpr (!Traits::kDqFirst) add_dq(tdQrdQ, dq_tile, shared, warp, lane);
      }
    }
    if constexpr (Traits::kDropout) {  // ---- dropout: dV = (Pᵀ ∘ keep) dO / (1 - p)
      CUTE_UNROLL
      for (int i = 0; i < size(tdVrdV); ++i) tdVrdV(i) *= params.dropout_scale;
    }
    // Every product reading K and V has retired (each step ends with wait<0>).
    __syncwarp();
    if (cutlass::canonical_lane_idx() == 0) cutlass::arch::ClusterBarrier::arrive(&shared.barrier_kv_empty);
  }
};

}  // namespace flashcore::cuda::sm90
