// The consumer step of the transposed-arrangement backward (d256; bwd_swapkv_traits.h) for one key
// block. The producer (load), the block geometry (block_of) and the row-statistics offsets are
// BwdMainloop's, unchanged.
//
// Per query block:
//   1. S = Q Kᵀ and dP = dO Vᵀ issued back to back (SS; warpgroup w: keys [w N/2, (w+1) N/2)).
//   2. P = exp2(S scale_log2 - lse_log2[query]) (masked tiles only: invisible pairs to 0) once S is
//      done, under dP; P to smem (this step's buffer) by stmatrix.
//   3. dS = P ∘ (dP - dsum[query]); dS to smem.
//   4. fence, named barrier: both halves of P and dS are visible to both warpgroups' tensor cores.
//   5. dQᵀ = Kᵀ dSᵀ, dVᵀ += dOᵀ P, dKᵀ += Qᵀ dS issued (SS, warpgroup w: its d atoms).
//   6. Once dQᵀ retires, its partial is added into dq_accum from registers (bwd_dq_red.h) while
//      dVᵀ and dKᵀ still run; once those retire the Q and dO stages go back to the producer.
// P and dS have two buffers, so one barrier per step suffices (bwd_tile_size.h says why).
#pragma once

#include <cmath>

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "cuda/common/mask.h"
#include "cuda/sm90/bwd_dq_red.h"
#include "cuda/sm90/bwd_mainloop.h"
#include "cuda/sm90/bwd_named_barrier.h"
#include "cuda/sm90/fragment.h"
#include "cuda/sm90/wgmma.h"

namespace flashcore::cuda::sm90 {

template <class Traits>
struct BwdSwapKvMainloop : BwdMainloop<Traits> {
  using Base = BwdMainloop<Traits>;
  using Element = typename Traits::Element;
  using Params = typename Traits::Params;
  using SharedStorage = typename Traits::SharedStorage;
  using Pipeline = typename Base::Pipeline;
  using State = typename Base::State;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;

  // Consumer: on return tdVrdV and tdKrdK hold dVᵀ and dKᵀ / softmax_scale of the key block
  // (this warpgroup's d rows). The pipeline states and the P/dS buffer index carry over from the
  // CTA's previous key block.
  template <class FragKV>
  __forceinline__ __device__ static void mma(Params const& params, SharedStorage& shared, BwdBlock const& blk,
                                             int thread_idx, State& q_state, State& do_state, int& buf,
                                             FragKV& tdVrdV, FragKV& tdKrdK) {
    using namespace cute;
    Pipeline pipeline_q{shared.pipeline_q};
    Pipeline pipeline_do{shared.pipeline_do};
    Tensor sQ = make_tensor(make_smem_ptr(shared.q.data()), typename Traits::SmemLayoutQ{});        // (M, d, stage)
    Tensor sdO = make_tensor(make_smem_ptr(shared.d_o.data()), typename Traits::SmemLayoutQ{});     // (M, d, stage)
    Tensor sQt = make_tensor(make_smem_ptr(shared.q.data()), typename Traits::SmemLayoutQt{});      // (d, M, stage)
    Tensor sdOt = make_tensor(make_smem_ptr(shared.d_o.data()), typename Traits::SmemLayoutQt{});   // (d, M, stage)
    Tensor sK = make_tensor(make_smem_ptr(shared.k.data()), typename Traits::SmemLayoutK{});        // (N, d)
    Tensor sV = make_tensor(make_smem_ptr(shared.v.data()), typename Traits::SmemLayoutK{});        // (N, d)
    Tensor sKt = make_tensor(make_smem_ptr(shared.k.data()), typename Traits::SmemLayoutKt{});      // (d, N)
    Tensor sP = make_tensor(make_smem_ptr(shared.p.data()), typename Traits::SmemLayoutPdS{});      // (M, N, buf)
    Tensor sdS = make_tensor(make_smem_ptr(shared.ds.data()), typename Traits::SmemLayoutPdS{});    // (M, N, buf)
    Tensor sPt = make_tensor(make_smem_ptr(shared.p.data()), typename Traits::SmemLayoutPdSt{});    // (N, M, buf)
    Tensor sdSt = make_tensor(make_smem_ptr(shared.ds.data()), typename Traits::SmemLayoutPdSt{});  // (N, M, buf)

    typename Traits::TiledMmaSdP mma_sdp;
    typename Traits::TiledMmadKV mma_dkv;
    typename Traits::TiledMmadQ mma_dq;
    auto thr_sdp = mma_sdp.get_thread_slice(thread_idx);
    auto thr_dkv = mma_dkv.get_thread_slice(thread_idx);
    auto thr_dq = mma_dq.get_thread_slice(thread_idx);
    Tensor tSrQ = thr_sdp.partition_fragment_A(sQ);        // (MMA, MMA_M, MMA_d, stage) descriptors
    Tensor tSrK = thr_sdp.partition_fragment_B(sK);        // (MMA, MMA_N, MMA_d)
    Tensor tdPrdO = thr_sdp.partition_fragment_A(sdO);     // (MMA, MMA_M, MMA_d, stage)
    Tensor tdPrV = thr_sdp.partition_fragment_B(sV);       // (MMA, MMA_N, MMA_d)
    Tensor tdVrdOt = thr_dkv.partition_fragment_A(sdOt);   // (MMA, MMA_d, MMA_M, stage)
    Tensor tdVrPt = thr_dkv.partition_fragment_B(sPt);     // (MMA, MMA_N, MMA_M, buf)
    Tensor tdKrQt = thr_dkv.partition_fragment_A(sQt);     // (MMA, MMA_d, MMA_M, stage)
    Tensor tdKrdSt = thr_dkv.partition_fragment_B(sdSt);   // (MMA, MMA_N, MMA_M, buf)
    Tensor tdQrKt = thr_dq.partition_fragment_A(sKt);      // (MMA, MMA_d, MMA_N)
    Tensor tdQrdS = thr_dq.partition_fragment_B(sdS);      // (MMA, MMA_M, MMA_N, buf)

    Tensor tSrS = partition_fragment_C(mma_sdp, typename Traits::ShapeSdP{});    // (MMA, MMA_M, MMA_N) S
    Tensor tdPrdP = partition_fragment_C(mma_sdp, typename Traits::ShapeSdP{});  // (MMA, MMA_M, MMA_N) dP
    Tensor tdQrdQ = partition_fragment_C(mma_dq, typename Traits::ShapedQ{});    // (MMA, MMA_d, MMA_M) dQᵀ
    Tensor tScS = thr_sdp.partition_C(make_identity_tensor(typename Traits::ShapeSdP{}));  // (query, key)
    Tensor tPrP = make_tensor<Element>(tSrS.layout());     // P, 16-bit, accumulator-shaped
    Tensor tdSrdS = make_tensor<Element>(tSrS.layout());   // dS, the same

    // P and dS to smem by stmatrix: queries are fragment rows, keys (contiguous in sP) its columns.
    auto smem_tiled_copy_PdS = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, Element>{}, mma_sdp);
    auto smem_thr_copy_PdS = smem_tiled_copy_PdS.get_thread_slice(thread_idx);
    Tensor tPsP = smem_thr_copy_PdS.partition_D(sP);        // (CPY, CPY_M, CPY_N, buf)
    Tensor tdSsdS = smem_thr_copy_PdS.partition_D(sdS);     // (CPY, CPY_M, CPY_N, buf)
    Tensor tPrP_stsm = smem_thr_copy_PdS.retile_S(tPrP);    // (CPY, CPY_M, CPY_N)
    Tensor tdSrdS_stsm = smem_thr_copy_PdS.retile_S(tdSrdS);  // (CPY, CPY_M, CPY_N)

    const AttentionMask mask = Base::mask_of(params);
    const int n0 = blk.n_block * kBlockN;
    const int warp = thread_idx / 32;
    const int lane = thread_idx % 32;
    // Deterministic mode: this CTA column's own slice (bwd_dq_red.h says why the sums are ordered).
    float* dq_accum = params.dq_accum + (params.deterministic ? blockIdx.x * params.dq_accum_split_stride : 0);

    clear(tdVrdV);
    clear(tdKrdK);
    cutlass::arch::ClusterTransactionBarrier::wait(&shared.barrier_kv, blk.iteration & 1);

    for (int head = blk.head_begin; head < blk.head_end; ++head) {
      const int64_t stat_offset = Base::row_stat_offset(params, blk.batch, head);
      for (int m = blk.m_block_min; m < blk.m_block_max; ++m) {
        const int m0 = m * kBlockM;
        pipeline_q.consumer_wait(q_state);
        Tensor tSrQ_stage = tSrQ(_, _, _, q_state.index);  // wgmma_gemm takes A by lvalue reference
        wgmma_gemm</*zero*/ true, /*wait*/ -1, /*regA*/ false>(mma_sdp, tSrQ_stage, tSrK, tSrS);
        pipeline_do.consumer_wait(do_state);
        Tensor tdPrdO_stage = tdPrdO(_, _, _, do_state.index);
        wgmma_gemm<true, -1, false>(mma_sdp, tdPrdO_stage, tdPrV, tdPrdP);

        // P, under dP. Masked pairs get -inf before exp2 (so 0 whatever lse_log2 is); rows past
        // seqlen_q have lse_log2 = +inf and come out 0 without a mask.
        float const* lse = shared.lse_log2.data() + q_state.index * kBlockM;
        warpgroup_wait<1>();
        warpgroup_fence_operand(tSrS);
        if (mask.tile_needs_mask(m0, n0, kBlockN)) {
          CUTE_UNROLL
          for (int i = 0; i < size(tSrS); ++i) {
            const int query = get<0>(tScS(i)), key = get<1>(tScS(i));
            const float x = tSrS(i) * params.scale_log2 - lse[query];
            tSrS(i) = exp2f(mask.visible(m0 + query, n0 + key) ? x : -INFINITY);
          }
        } else {
          CUTE_UNROLL
          for (int i = 0; i < size(tSrS); ++i) tSrS(i) = exp2f(tSrS(i) * params.scale_log2 - lse[get<0>(tScS(i))]);
        }
        convert_into(tSrS, tPrP);
        cute::copy(smem_tiled_copy_PdS, tPrP_stsm, tPsP(_, _, _, buf));

        // dS = P ∘ (dP - D).
        float const* dsum = shared.dsum.data() + do_state.index * kBlockM;
        warpgroup_wait<0>();
        warpgroup_fence_operand(tdPrdP);
        CUTE_UNROLL
        for (int i = 0; i < size(tdPrdP); ++i) tdPrdP(i) = tSrS(i) * (tdPrdP(i) - dsum[get<0>(tScS(i))]);
        convert_into(tdPrdP, tdSrdS);
        cute::copy(smem_tiled_copy_PdS, tdSrdS_stsm, tdSsdS(_, _, _, buf));

        // Both warpgroups' halves of P and dS, visible to the tensor cores of both.
        cutlass::arch::fence_view_async_shared();
        named_barrier_sync(Traits::kConsumerThreads, BwdNamedBarrier::kDsReady);

        Tensor tdVrdOt_stage = tdVrdOt(_, _, _, do_state.index);
        Tensor tdKrQt_stage = tdKrQt(_, _, _, q_state.index);
        float* dq_tile = dq_accum + (stat_offset + m0) * kHeadDim;
        // dQᵀ first: once it has retired (wgmma batches retire in issue order, so wait<2> leaves
        // dVᵀ and dKᵀ in flight) its 16 reductions a thread leave while the tensor cores run dVᵀ
        // and dKᵀ, instead of after every product of the step (docs/tuning/backward_sm90.md, d256
        // run 1).
        wgmma_gemm<true, -1, false>(mma_dq, tdQrKt, tdQrdS(_, _, _, buf), tdQrdQ);
        wgmma_gemm<false, -1, false>(mma_dkv, tdVrdOt_stage, tdVrPt(_, _, _, buf), tdVrdV);
        wgmma_gemm<false, /*wait*/ 2, false>(mma_dkv, tdKrQt_stage, tdKrdSt(_, _, _, buf), tdKrdK);
        warpgroup_fence_operand(tdQrdQ);
        dq_red_add(tdQrdQ, dq_tile, warp, lane);
        warpgroup_wait<0>();
        warpgroup_fence_operand(tdVrdV);
        warpgroup_fence_operand(tdKrdK);
        // dVᵀ and dKᵀ have retired: Q and dO (tiles and rows) are free. Every thread arrives
        // (bwd_mainloop.h says why).
        cutlass::arch::ClusterBarrier::arrive(&shared.pipeline_q.empty[q_state.index]);
        cutlass::arch::ClusterBarrier::arrive(&shared.pipeline_do.empty[do_state.index]);
        q_state.advance();
        do_state.advance();
        buf ^= 1;

      }
    }
    // Every product reading K and V has retired (each step ends with wait<0>).
    __syncwarp();
    if (cutlass::canonical_lane_idx() == 0) cutlass::arch::ClusterBarrier::arrive(&shared.barrier_kv_empty);
  }
};

}  // namespace flashcore::cuda::sm90
