// The forward mainloop: load() runs in the producer's elected thread and streams Q and the
// K/V tiles of one (m_block, head, batch) tile by TMA; mma() runs in every consumer thread and
// computes O and the softmax statistics of its warpgroup's 64 query rows.
//
// Key blocks are visited from the last to the first, so the few blocks that need a mask (the
// ragged end of seqlen_k, the causal diagonal) come first and the unmasked loop carries no
// mask code. V lags K by one block: QK^T of block n is issued together with P V of block n+1,
// and the softmax of block n runs while P V of block n+1 is still on the tensor cores. With
// ping-pong the consumer warpgroups also take turns issuing their GEMMs, so one's softmax runs
// under the others' products.
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "cuda/common/mask.h"
#include "cuda/sm90/fragment.h"
#include "cuda/sm90/fwd_score_options.h"
#include "cuda/sm90/fwd_sequence.h"
#include "cuda/sm90/fwd_softmax.h"
#include "cuda/sm90/named_barrier.h"
#include "cuda/sm90/pipeline.h"
#include "cuda/sm90/tile_scheduler.h"
#include "cuda/sm90/wgmma.h"

namespace flashcore::cuda::sm90 {

template <class Traits, FwdVariant kVariant = FwdVariant::kPlain>
struct FwdMainloop {
  using Element = typename Traits::Element;
  using Params = typename Traits::Params;
  using SharedStorage = typename Traits::SharedStorage;
  using Pipeline = TmaPipeline<Traits::kStages, Traits::kClusterM>;
  using State = typename Pipeline::State;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kRows = 2;  // rows of the 64-row slab each consumer thread holds
  using Score = FwdScore<Traits, kVariant>;
  using Softmax = std::conditional_t<Score::kBoundedScores, FwdSoftmaxBounded<kRows, Traits::kExp2FmaEvery>,
                                     FwdSoftmax<kRows, Traits::kExp2FmaEvery>>;
  using OptionArgs = FwdOptionArgs<kVariant>;

  // Ping-pong turns: warpgroup w waits for its turn before issuing GEMMs and hands the turn to
  // warpgroup w+1 (cyclically) once they are issued. Each warpgroup issues the same number of
  // batches per tile, so the last hand-over of a tile is the first turn of the next.
  static constexpr int kTurnThreads = 2 * 128;  // the waiting warpgroup + the one handing over
  __forceinline__ __device__ static void mma_init(int thread_idx) {
    if constexpr (Traits::kPingPong) {
      if (thread_idx / 128 == 0) named_barrier_arrive(kTurnThreads, FwdNamedBarrier::kWarpSchedulerWG1);
    }
  }
  __forceinline__ __device__ static void turn_wait(int wg) {
    if constexpr (Traits::kPingPong) {
      named_barrier_sync(kTurnThreads, FwdNamedBarrier(int(FwdNamedBarrier::kWarpSchedulerWG1) + wg));
    }
  }
  __forceinline__ __device__ static void turn_pass(int wg) {
    if constexpr (Traits::kPingPong) {
      const int next = wg + 1 == Traits::kConsumerWGs ? 0 : wg + 1;
      named_barrier_arrive(kTurnThreads, FwdNamedBarrier(int(FwdNamedBarrier::kWarpSchedulerWG1) + next));
    }
  }

  // Which Q buffer and mbarrier parity the CTA's `iteration`-th tile uses.
  __forceinline__ __device__ static int q_stage(int iteration) { return iteration % Traits::kQStages; }
  __forceinline__ __device__ static uint32_t q_phase(int iteration) { return (iteration / Traits::kQStages) & 1; }
  __forceinline__ __device__ static Element* q_buffer(SharedStorage& shared, int iteration) {
    return shared.q.data() + q_stage(iteration) * cute::cosize_v<typename Traits::SmemLayoutQ>;
  }

  // Producer: `iteration` counts the tiles this CTA has loaded before (which Q buffer, and the
  // phase of its barriers); `t` is the scheduler's handle of `tile` (its successor's Q may be
  // prefetched).
  template <class Scheduler>
  __forceinline__ __device__ static void load(Params const& params, OptionArgs const& args, SharedStorage& shared,
                                              State& k_state, State& v_state, FwdTile const& tile, int iteration,
                                              Scheduler const& scheduler, int t) {
    using namespace cute;
    Pipeline pipeline_k{shared.pipeline_k};
    Pipeline pipeline_v{shared.pipeline_v};
    Tensor sQ = make_tensor(make_smem_ptr(q_buffer(shared, iteration)), typename Traits::SmemLayoutQ{});  // (M, d)
    Tensor sK = make_tensor(make_smem_ptr(shared.k.data()), typename Traits::SmemLayoutK{});    // (N, d, stage)
    Tensor sVt = make_tensor(make_smem_ptr(shared.v.data()), typename Traits::SmemLayoutVt{});  // (d, N, stage)

    const int kv_head = tile.head / params.group_size;
    const FwdSequence<Traits> seq(params, tile.batch);
    // Q rows in the tile grid's frame: the first row_offset rows lie above the sequence (negative
    // TMA coordinates, zero-filled like any out-of-bounds row; varlen: the previous sequence's
    // rows, whose outputs are not stored). Varlen: the sequence's slices of the packed tensors.
    Tensor mQ = domain_offset(make_coord(seq.row_q - seq.row_offset, _0{}),
                              params.tma_q.get_tma_tensor(params.shape_q)(_, _, tile.head, seq.tma_batch));  // (seqlen_q, d)
    Tensor mK = domain_offset(make_coord(seq.row_k, _0{}),
                              params.tma_k.get_tma_tensor(params.shape_k)(_, _, kv_head, seq.tma_batch));  // (seqlen_k, d)
    Tensor mVt = domain_offset(make_coord(_0{}, seq.row_k),
                               params.tma_v.get_tma_tensor(params.shape_vt)(_, _, kv_head, seq.tma_batch));  // (d, seqlen_k)
    Tensor gQ = local_tile(mQ, Shape<Int<kBlockM>, Int<kHeadDim>>{}, make_coord(tile.m_block, _0{}));  // (M, d)
    Tensor gK = local_tile(mK, Shape<Int<kBlockN>, Int<kHeadDim>>{}, make_coord(_, _0{}));  // (N, d, n)
    Tensor gVt = local_tile(mVt, Shape<Int<kHeadDim>, Int<kBlockN>>{}, make_coord(_0{}, _));  // (d, N, n)

    auto tma_q_parts = tma_partition(params.tma_q, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sQ),
                                     group_modes<0, 2>(gQ));
    Tensor tQgQ = get<0>(tma_q_parts);  // (TMA)
    Tensor tQsQ = get<1>(tma_q_parts);  // (TMA)
    // K/V with a cluster: this CTA loads its 1/kClusterM share of each tile and multicasts it.
    constexpr int kClusterM = Traits::kClusterM;
    const int cta_rank = kClusterM == 1 ? 0 : int(cute::block_rank_in_cluster());
    constexpr uint16_t kMulticastMask = uint16_t((1u << kClusterM) - 1);
    auto tma_k_parts = tma_partition(params.tma_k, cta_rank, Layout<Int<kClusterM>>{}, group_modes<0, 2>(sK),
                                     group_modes<0, 2>(gK));
    auto tma_v_parts = tma_partition(params.tma_v, cta_rank, Layout<Int<kClusterM>>{}, group_modes<0, 2>(sVt),
                                     group_modes<0, 2>(gVt));
    Tensor tKgK = get<0>(tma_k_parts);  // (TMA, n)
    Tensor tKsK = get<1>(tma_k_parts);  // (TMA, stage)
    Tensor tVgV = get<0>(tma_v_parts);  // (TMA, n)
    Tensor tVsV = get<1>(tma_v_parts);  // (TMA, stage)

    auto load_k = [&](int n) {
      uint64_t& full = pipeline_k.producer_acquire(k_state, Traits::kBytesKV);
      if constexpr (kClusterM == 1) {
        copy(params.tma_k.with(full), tKgK(_, n), tKsK(_, k_state.index));
      } else {
        copy(params.tma_k.with(full, kMulticastMask), tKgK(_, n), tKsK(_, k_state.index));
      }
      k_state.advance();
    };
    auto load_v = [&](int n) {
      uint64_t& full = pipeline_v.producer_acquire(v_state, Traits::kBytesKV);
      if constexpr (kClusterM == 1) {
        copy(params.tma_v.with(full), tVgV(_, n), tVsV(_, v_state.index));
      } else {
        copy(params.tma_v.with(full, kMulticastMask), tVgV(_, n), tVsV(_, v_state.index));
      }
      v_state.advance();
    };

    // A Q buffer is free once every consumer warp has finished the last QK^T of the tile that used
    // it before. One buffer: that is the previous tile, so its first K goes out before the wait.
    // Two buffers: the tile before that, long done, so Q goes out first, as soon as the producer
    // has issued the previous tile's last V, well before the consumers reach this tile.
    const int stage = q_stage(iteration);
    auto load_q = [&]() {
      if (iteration >= Traits::kQStages) {
        cutlass::arch::ClusterBarrier::wait(&shared.barrier_q_empty[stage], q_phase(iteration) ^ 1);
      }
      cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&shared.barrier_q[stage], Traits::kBytesQ);
      copy(params.tma_q.with(shared.barrier_q[stage]), tQgQ, tQsQ);
    };
    // kPrefetchNextQ: the next tile's Q goes to L2 when this tile has kPrefetchLead key blocks
    // left to load (at its start if it is shorter). The producer runs about kStages blocks ahead of
    // the consumers, so that is kPrefetchLead + kStages blocks (>= 5-10 us at d128-d256) before
    // the consumers free Q's buffer: enough for every CTA's Q to arrive from HBM at once (the
    // persistent CTAs reach their tile boundaries together), late enough that the streaming K/V
    // do not evict it first.
    constexpr int kPrefetchLead = 4;
    auto prefetch_next_q = [&]() {
      if constexpr (Traits::kPrefetchNextQ) {
        const int t_next = scheduler.next_tile(t);
        if (scheduler.valid(t_next)) {
          const FwdTile next = scheduler.decode(t_next);
          const FwdSequence<Traits> next_seq(params, next.batch);
          Tensor mQn = domain_offset(make_coord(next_seq.row_q - next_seq.row_offset, _0{}),
                                     params.tma_q.get_tma_tensor(params.shape_q)(_, _, next.head, next_seq.tma_batch));
          Tensor gQn = local_tile(mQn, Shape<Int<kBlockM>, Int<kHeadDim>>{}, make_coord(next.m_block, _0{}));
          cute::prefetch(params.tma_q, get<0>(tma_partition(params.tma_q, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sQ),
                                                            group_modes<0, 2>(gQn))));
        }
      }
    };
    const auto trips = Score::trip_counts(Score::mask_of(seq, args), tile.m_block);
    const int n_begin = trips.n_begin, n_end = trips.n_end;
    if constexpr (Traits::kQStages > 1) load_q();
    if (n_end > n_begin) load_k(n_end - 1);
    if constexpr (Traits::kQStages == 1) load_q();
    if (n_end - 1 <= n_begin + kPrefetchLead) prefetch_next_q();
    for (int n = n_end - 1; n > n_begin; --n) {
      if (n == n_begin + kPrefetchLead) prefetch_next_q();
      load_k(n - 1);
      load_v(n);
    }
    if (n_end > n_begin) load_v(n_begin);
  }

  // Producer, after the CTA's last tile. With a cluster, the other CTAs' consumers arrive on this
  // CTA's empty barriers until their last stage is released; the CTA must not exit before that.
  // (A cluster-wide barrier at the kernel's end would do too; either costs a 24-register producer
  // 40-48 B of spills, hence setmaxnreg 40/232 for clustered kernels in fwd_traits.h.)
  __forceinline__ __device__ static void load_tail(SharedStorage& shared, State const& k_state, State const& v_state) {
    if constexpr (Traits::kClusterM > 1) {
      Pipeline{shared.pipeline_k}.producer_tail(k_state);
      Pipeline{shared.pipeline_v}.producer_tail(v_state);
    }
  }

  // Consumer: on return tOrO holds the normalised output rows and lse their log-sum-exp.
  template <class FragO>
  __forceinline__ __device__ static void mma(Params const& params, OptionArgs const& args, SharedStorage& shared,
                                             State& k_state, State& v_state, FwdTile const& tile, int iteration,
                                             int thread_idx, FragO& tOrO, float (&lse)[kRows]) {
    using namespace cute;
    Pipeline pipeline_k{shared.pipeline_k};
    Pipeline pipeline_v{shared.pipeline_v};
    Tensor sQ = make_tensor(make_smem_ptr(q_buffer(shared, iteration)), typename Traits::SmemLayoutQ{});  // (M, d)
    Tensor sK = make_tensor(make_smem_ptr(shared.k.data()), typename Traits::SmemLayoutK{});    // (N, d, stage)
    Tensor sVt = make_tensor(make_smem_ptr(shared.v.data()), typename Traits::SmemLayoutVt{});  // (d, N, stage)

    typename Traits::TiledMmaQK mma_qk;
    typename Traits::TiledMmaPV mma_pv;
    auto thr_qk = mma_qk.get_thread_slice(thread_idx);
    auto thr_pv = mma_pv.get_thread_slice(thread_idx);
    Tensor tSrQ = thr_qk.partition_fragment_A(sQ);   // (MMA, MMA_M, MMA_K) descriptors
    Tensor tSrK = thr_qk.partition_fragment_B(sK);   // (MMA, MMA_N, MMA_K, stage)
    Tensor tOrV = thr_pv.partition_fragment_B(sVt);  // (MMA, MMA_N, MMA_K, stage)
    Tensor tSrS = partition_fragment_C(mma_qk, select<0, 1>(typename Traits::TileShapeQK{}));  // (MMA, MMA_M, MMA_N)
    Tensor tScS = thr_qk.partition_C(make_identity_tensor(select<0, 1>(typename Traits::TileShapeQK{})));
    // P in the register-A layout of the P V product, sharing S's element order.
    Tensor tOrP = make_tensor<Element>(wgmma_acc_as_a_operand(tSrS.layout()));  // ((2,2,2), MMA_M, N/16)

    const FwdSequence<Traits> seq(params, tile.batch);
    const Score score(params, seq, args, tile.head, tile.batch);
    const AttentionMask& mask = score.mask;
    const auto trips = score.trip_counts(tile.m_block);
    const int n_begin = trips.n_begin, n_end = trips.n_end;
    const int row0 = tile.m_block * kBlockM;  // in the mask's (row_offset-shifted) frame
    [[maybe_unused]] const int query0 = row0 - seq.row_offset;  // in the sequence's frame (dropout)
    Softmax softmax;
    float correction[kRows];
    const int wg = thread_idx / 128;

    // After the QK^T of key block 0 (the last one to read Q) has completed: Q's buffer may be
    // refilled with the next tile's Q.
    auto release_q = [&]() {
      if (cutlass::canonical_lane_idx() == 0) {
        cutlass::arch::ClusterBarrier::arrive(&shared.barrier_q_empty[q_stage(iteration)]);
      }
    };

    clear(tOrO);
    cutlass::arch::ClusterTransactionBarrier::wait(&shared.barrier_q[q_stage(iteration)], q_phase(iteration));
    if (n_end <= n_begin) release_q();
    if (n_end > n_begin) {
      // First block: S = Q K^T, softmax, nothing to accumulate yet.
      int n = n_end - 1;
      pipeline_k.consumer_wait(k_state);
      turn_wait(wg);
      wgmma_gemm</*zero*/ true, /*wait*/ -1, /*regA*/ false>(mma_qk, tSrQ, tSrK(_, _, _, k_state.index), tSrS);
      turn_pass(wg);
      warpgroup_wait<0>();
      warpgroup_fence_operand(tSrS);
      pipeline_k.consumer_release(k_state);
      k_state.advance();
      if (n == n_begin) release_q();
      score.apply(args, tSrS, tScS, row0, n * kBlockN);
      if (trips.needs_mask(n)) mask.apply(tSrS, tScS, row0, n * kBlockN);
      softmax.online(tSrS, score.scale_log2, correction);
      convert_into(tSrS, tOrP);
      score.drop(args, tOrP, tScS, query0, n * kBlockN, tile.head, tile.batch);

      // Steady state: S(n) = Q K(n)^T and O += P(n+1) V(n+1) in flight together.
      auto step = [&](int n, auto masked) __attribute__((always_inline)) {
        pipeline_k.consumer_wait(k_state);
        turn_wait(wg);
        wgmma_gemm<true, -1, false>(mma_qk, tSrQ, tSrK(_, _, _, k_state.index), tSrS);
        if constexpr (Traits::kRescaleOBeforeGemm) Softmax::rescale(tOrO, correction);
        pipeline_v.consumer_wait(v_state);
        wgmma_gemm<false, -1, true>(mma_pv, tOrP, tOrV(_, _, _, v_state.index), tOrO);
        turn_pass(wg);
        warpgroup_wait<1>();
        warpgroup_fence_operand(tSrS);
        pipeline_k.consumer_release(k_state);
        k_state.advance();
        if (n == n_begin) release_q();
        score.apply(args, tSrS, tScS, row0, n * kBlockN);
        if constexpr (decltype(masked)::value) mask.apply(tSrS, tScS, row0, n * kBlockN);
        softmax.online(tSrS, score.scale_log2, correction);
        warpgroup_wait<0>();
        warpgroup_fence_operand(tOrO);
        pipeline_v.consumer_release(v_state);
        v_state.advance();
        if constexpr (!Traits::kRescaleOBeforeGemm) Softmax::rescale(tOrO, correction);
        convert_into(tSrS, tOrP);
        score.drop(args, tOrP, tScS, query0, n * kBlockN, tile.head, tile.batch);
      };
      // Masked blocks right of the first row's window edge (the diagonal, seqlen_k), unmasked ones,
      // and with a window, masked ones at the last row's left edge too. Two call sites of step()
      // either way: a third stops ptxas inlining it, and wgmma across a call serialises (C7517).
      // With a window the masked and unmasked runs alternate (right edge, middle, left edge) in an
      // outer loop, each run a tight loop of one call site as in the plain kernel.
      n = n_end - 2;
      if constexpr (Score::kWindow) {
        while (n >= n_begin) {
          if (trips.needs_mask(n)) {
            const int last = n >= trips.n_unmasked ? max(trips.n_unmasked, n_begin) : n_begin;
            for (; n >= last; --n) step(n, cute::true_type{});
          } else {
            const int last = max(trips.n_unmasked_begin, n_begin);
            for (; n >= last; --n) step(n, cute::false_type{});
          }
        }
      } else {
        for (; n >= 0 && n >= trips.n_unmasked; --n) step(n, cute::true_type{});
        for (; n >= 0; --n) step(n, cute::false_type{});
      }

      // Last block's P V.
      if constexpr (Traits::kRescaleOBeforeGemm) Softmax::rescale(tOrO, correction);
      pipeline_v.consumer_wait(v_state);
      turn_wait(wg);
      wgmma_gemm<false, -1, true>(mma_pv, tOrP, tOrV(_, _, _, v_state.index), tOrO);
      turn_pass(wg);
      warpgroup_wait<0>();
      warpgroup_fence_operand(tOrO);
      warpgroup_fence_operand(tOrP);
      pipeline_v.consumer_release(v_state);
      v_state.advance();
    }
    Tensor tScS_rc = make_tensor(tScS.data(), wgmma_acc_as_rows_cols(tScS.layout()));  // (rows, cols) -> coords
    softmax.finalize(tOrO, score.unit, lse,
                     [&](int r) { return mask.row_sees_a_key(row0 + get<0>(tScS_rc(r, 0))); });
    Score::scale_output(args, tOrO);
  }
};

}  // namespace flashcore::cuda::sm90
