// The sm80 forward kernel: one CTA computes a kBlockM-row block of O for one (batch, head).
//
//   prologue   Q tile and the last K tile in flight (cp.async)
//   mainloop   key blocks from last to first (the masked ones come first, so the mask check is a
//              uniform branch on the block index):
//                S = Q Kᵀ           tensor cores, operands streamed by ldmatrix from smem
//                score options      softcap, ALiBi (kScoreMod kernels only; common/score_mod.h)
//                mask               only on blocks that straddle the diagonal, the window's edges
//                                   or seqlen_k; blocks wholly outside the window never run (the
//                                   window exists only in the kWindow and kScoreMod kernels)
//                online softmax     running max/sum in registers, O rescaled by exp(Δmax)
//                dropout            kScoreMod kernels, a uniform branch: dropped probabilities
//                                   become 0 after the row sums (common/dropout.h); the kept
//                                   ones' 1 / (1 - p) is applied once to O in the epilogue
//                O += P V           P converted in registers to the A operand, V by ldmatrix.trans
//              while V of this block loads during Q Kᵀ and K of the next block during softmax/PV.
//   epilogue   O / rowsum through shared memory to 16-byte global stores; LSE per row.
#pragma once

#include <cmath>
#include <type_traits>

#include <cute/tensor.hpp>

#include "cuda/sm80/copy.h"
#include "cuda/common/dropout.h"
#include "cuda/common/epilogue.h"
#include "cuda/common/fragment.h"
#include "cuda/common/kernel_variant.h"
#include "cuda/sm80/fwd_epilogue.h"
#include "cuda/sm80/gemm.h"
#include "cuda/common/mask.h"
#include "cuda/common/score_mod.h"
#include "cuda/common/seqlen.h"
#include "cuda/common/softmax.h"
#include "cuda/common/tile_scheduler.h"
#include "cuda/params.h"

namespace flashcore::cuda::sm80 {

template <class Traits, bool kIsCausal, KernelVariant kVariant>
__global__ void __launch_bounds__(Traits::kNThreads, 1) fwd_kernel(const __grid_constant__ FwdParams params) {
  using namespace cute;
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr int kHeadDim = Traits::kHeadDim;

  extern __shared__ __align__(128) char smem[];
  const int tid = threadIdx.x;
  const TileCoord tile = SingleTileScheduler<kIsCausal>::tile();  // causal: longest query blocks first
  const int m_block = tile.block;
  const int head = tile.head;
  const int batch = tile.batch;
  const int kv_head = head / params.group_size;  // GQA/MQA by indexing: no copies of K and V
  const int m0 = m_block * kBlockM;
  const SeqlenInfo seq(params, batch);  // varlen: this sequence's lengths and first rows
  if (m0 >= seq.seqlen_q) return;       // varlen: the grid covers the longest sequence

  // Kernels without the window see none: the left-edge trip counts and compares fold away.
  constexpr bool kWindow = has_window(kVariant);
  constexpr bool kScoreMod = has_score_mod(kVariant);
  const AttentionMask mask{seq.seqlen_q, seq.seqlen_k, kIsCausal, kWindow ? params.window_left : -1,
                           kWindow ? params.window_right : -1};
  const int n_block_begin = mask.n_block_begin(m_block, kBlockM, kBlockN);  // 0 without a left window bound
  const int n_block_end = mask.n_block_end(m_block, kBlockM, kBlockN);
  if (n_block_end <= n_block_begin) {
    write_empty_block<Traits>(params, seq, m_block, head, batch);
    return;
  }
  const int n_block_unmasked = mask.n_block_unmasked(m_block, kBlockM, kBlockN);
  const int n_block_unmasked_begin = mask.n_block_unmasked_begin(m_block, kBlockM, kBlockN);

  // Global tensors of this (batch, head); the head_dim mode is static, columns past the real
  // head_dim are predicated off.
  const auto* q_ptr = static_cast<const Element*>(params.q) + batch * params.q_strides.batch +
                      seq.row_q * params.q_strides.row + head * params.q_strides.head;
  const auto* k_ptr = static_cast<const Element*>(params.k) + batch * params.k_strides.batch +
                      seq.row_k * params.k_strides.row + kv_head * params.k_strides.head;
  const auto* v_ptr = static_cast<const Element*>(params.v) + batch * params.v_strides.batch +
                      seq.row_k * params.v_strides.row + kv_head * params.v_strides.head;
  auto* o_ptr = static_cast<Element*>(params.out) + batch * params.o_strides.batch + seq.row_q * params.o_strides.row +
                head * params.o_strides.head;
  Tensor mQ = make_tensor(make_gmem_ptr(q_ptr), make_shape(seq.seqlen_q, Int<kHeadDim>{}),
                          make_stride(params.q_strides.row, _1{}));
  Tensor mK = make_tensor(make_gmem_ptr(k_ptr), make_shape(seq.seqlen_k, Int<kHeadDim>{}),
                          make_stride(params.k_strides.row, _1{}));
  Tensor mV = make_tensor(make_gmem_ptr(v_ptr), make_shape(seq.seqlen_k, Int<kHeadDim>{}),
                          make_stride(params.v_strides.row, _1{}));
  Tensor mO = make_tensor(make_gmem_ptr(o_ptr), make_shape(seq.seqlen_q, Int<kHeadDim>{}),
                          make_stride(params.o_strides.row, _1{}));
  Tensor gQ = local_tile(mQ, Shape<Int<kBlockM>, Int<kHeadDim>>{}, make_coord(m_block, 0));  // (kBlockM, kHeadDim)
  Tensor gO = local_tile(mO, Shape<Int<kBlockM>, Int<kHeadDim>>{}, make_coord(m_block, 0));  // (kBlockM, kHeadDim)
  Tensor gK = local_tile(mK, Shape<Int<kBlockN>, Int<kHeadDim>>{}, make_coord(_, 0));  // (kBlockN, kHeadDim, n)
  Tensor gV = local_tile(mV, Shape<Int<kBlockN>, Int<kHeadDim>>{}, make_coord(_, 0));  // (kBlockN, kHeadDim, n)

  constexpr int kStagesKV = Traits::kStagesKV;
  constexpr int kKVElems = Traits::kSmemKVBytes / int(sizeof(Element));
  Tensor sQ = make_tensor(make_smem_ptr(reinterpret_cast<Element*>(smem)), typename Traits::SmemLayoutQ{});
  Element* smem_k = sQ.data().get() + size(sQ);
  Element* smem_v = smem_k + kStagesKV * kKVElems;
  auto sK_at = [&](int stage) { return make_tensor(make_smem_ptr(smem_k + stage * kKVElems), typename Traits::SmemLayoutKV{}); };
  auto sV_at = [&](int stage) { return make_tensor(make_smem_ptr(smem_v + stage * kKVElems), typename Traits::SmemLayoutKV{}); };
  auto sVt_at = [&](int stage) { return make_tensor(make_smem_ptr(smem_v + stage * kKVElems), typename Traits::SmemLayoutVt{}); };
  Tensor sK = sK_at(0);
  Tensor sVtNoSwizzle = make_tensor(smem_v, typename Traits::SmemLayoutVtNoSwizzle{});  // shapes only

  // Global -> shared copies, with identity tensors giving each element's (row, col) for predicates.
  typename Traits::GmemTiledCopyLoad gmem_tiled_copy;
  auto gmem_thr_copy = gmem_tiled_copy.get_thread_slice(tid);
  Tensor tQgQ = gmem_thr_copy.partition_S(gQ);  // (CPY, CPY_M, CPY_K)
  Tensor tQsQ = gmem_thr_copy.partition_D(sQ);
  Tensor tKgK = gmem_thr_copy.partition_S(gK);  // (CPY, CPY_N, CPY_K, n)
  auto tKsK_at = [&](int stage) { return gmem_thr_copy.partition_D(sK_at(stage)); };
  Tensor tVgV = gmem_thr_copy.partition_S(gV);  // (CPY, CPY_N, CPY_K, n)
  auto tVsV_at = [&](int stage) { return gmem_thr_copy.partition_D(sV_at(stage)); };
  Tensor tQcQ = gmem_thr_copy.partition_S(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  Tensor tKVcKV = gmem_thr_copy.partition_S(make_identity_tensor(Shape<Int<kBlockN>, Int<kHeadDim>>{}));

  // Tensor-core partitions.
  typename Traits::TiledMma tiled_mma;
  auto thr_mma = tiled_mma.get_thread_slice(tid);
  Tensor tSrQ = thr_mma.partition_fragment_A(sQ);            // (MMA, MMA_M, MMA_K)
  Tensor tSrK = thr_mma.partition_fragment_B(sK);            // (MMA, MMA_N, MMA_K)
  Tensor tOrVt = thr_mma.partition_fragment_B(sVtNoSwizzle);  // (MMA, MMA_K=head_dim, MMA_N)
  Tensor acc_o = partition_fragment_C(tiled_mma, Shape<Int<kBlockM>, Int<kHeadDim>>{});  // (MMA, MMA_M, MMA_K)
  Tensor tScS = thr_mma.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{}));  // coords of S

  auto smem_copy_q = make_tiled_copy_A(typename Traits::SmemCopyAtom{}, tiled_mma);
  auto smem_copy_k = make_tiled_copy_B(typename Traits::SmemCopyAtom{}, tiled_mma);
  auto smem_copy_v = make_tiled_copy_B(typename Traits::SmemCopyAtomTransposed{}, tiled_mma);
  Tensor tSsQ = smem_copy_q.get_thread_slice(tid).partition_S(sQ);
  auto smem_thr_copy_k = smem_copy_k.get_thread_slice(tid);
  auto smem_thr_copy_v = smem_copy_v.get_thread_slice(tid);

  auto load_k = [&](int n, int stage) {
    cp_async_tile_zero_fill(tKgK(_, _, _, n), tKsK_at(stage), tKVcKV, seq.seqlen_k - n * kBlockN, params.head_dim);
  };
  auto load_v = [&](int n, int stage) {
    cp_async_tile_zero_fill(tVgV(_, _, _, n), tVsV_at(stage), tKVcKV, seq.seqlen_k - n * kBlockN, params.head_dim);
  };

  // Prologue: Q with the first K block; with two K/V buffers the first V block too, as its own
  // cp.async group so the first Q Kᵀ waits for Q and K only.
  const int rows_q = seq.seqlen_q - m0;
  cp_async_tile_zero_fill(tQgQ, tQsQ, tQcQ, rows_q, params.head_dim);
  int n_block = n_block_end - 1;
  load_k(n_block, 0);
  cp_async_fence();
  if constexpr (kStagesKV == 2) {
    load_v(n_block, 0);
    cp_async_fence();
  }

  constexpr int kRows = decltype(size<0>(accumulator_as_rows_cols(acc_o.layout())))::value;
  OnlineSoftmax<kRows> softmax;
  clear(acc_o);

  // Mainloop. One key block; kMasked is a compile-time tag so the unmasked blocks (all but the
  // one or two that straddle the diagonal or seqlen_k) carry no mask code at all.
  //   one K/V buffer:  V[n] loads during Q K[n]ᵀ, K[n-1] during softmax and P V[n];
  //   two K/V buffers: K[n-1] and V[n-1] load into the other buffers during the whole iteration.
  // cp.async groups are committed even when empty (the last block) so the wait counts stay fixed.
  int stage = 0;
  // The score-option kernels keep scores in units of score_unit (softcap, or the softmax scale:
  // then as the plain kernels do), score_mod.h; the softmax scales by that unit.
  [[maybe_unused]] const float alibi_slope = kScoreMod ? ScoreMod::slope(params, batch, head) : 0.0f;
  const float softmax_scale_log2 = kScoreMod ? params.score_unit_log2 : params.scale_log2;
  [[maybe_unused]] const TileDropout dropout(params, batch, head);
  auto process_key_block = [&](int n, auto masked_tag) {
    constexpr bool kMasked = decltype(masked_tag)::value;
    Tensor acc_s = partition_fragment_C(tiled_mma, Shape<Int<kBlockM>, Int<kBlockN>>{});  // (MMA, MMA_M, MMA_N)
    clear(acc_s);
    if constexpr (kStagesKV == 2) {
      cp_async_wait<1>();  // K[n] (and Q) landed; V[n] may still be in flight
      __syncthreads();     // ... for every thread; every warp is done with the other K buffer
      if (n > n_block_begin) load_k(n - 1, stage ^ 1);
      cp_async_fence();
    } else {
      cp_async_wait<0>();
      __syncthreads();  // K[n] (and Q) are in smem; every warp is done reading the previous V
      load_v(n, 0);
      cp_async_fence();
    }

    gemm_smem_smem(tiled_mma, acc_s, tSrQ, tSrK, tSsQ, smem_thr_copy_k.partition_S(sK_at(stage)), smem_copy_q,
                   smem_copy_k, tid);
    if constexpr (kScoreMod) ScoreMod::apply(params, mask.diagonal(), alibi_slope, acc_s, tScS, m0, n * kBlockN);
    if constexpr (kMasked) mask.apply(acc_s, tScS, m0, n * kBlockN);

    if constexpr (kStagesKV == 2) {
      cp_async_wait<1>();  // V[n] landed; K[n-1] may still be in flight
      __syncthreads();     // ... for every thread; every warp is done with the other V buffer
      if (n > n_block_begin) load_v(n - 1, stage ^ 1);
      cp_async_fence();
    } else {
      cp_async_wait<0>();
      __syncthreads();  // V[n] is in smem; every warp is done reading K[n]
      if (n > n_block_begin) {
        load_k(n - 1, 0);
        cp_async_fence();
      }
    }

    softmax.update(acc_s, acc_o, softmax_scale_log2);
    Tensor rP = convert_fragment<Element>(acc_s);
    if constexpr (kScoreMod) {
      if (params.has_dropout) {  // after the row sums, on the 16-bit P (common/dropout.h)
        constexpr int kRowsS = decltype(size<0>(accumulator_as_rows_cols(acc_s.layout())))::value;
        constexpr int kColsS = decltype(size<1>(accumulator_as_rows_cols(acc_s.layout())))::value;
        Tensor pairs = recast<std::uint32_t>(rP);  // (2 columns of a row) per entry, flat
        dropout.zero_dropped_pairs<16 * Traits::kNWarps, 8, kRowsS, kColsS>(pairs, m0 + get<0>(tScS(0)),
                                                                            n * kBlockN + get<1>(tScS(0)));
      }
    }
    Tensor tOrP = make_tensor(rP.data(), accumulator_as_a_operand(rP.layout()));  // (MMA, MMA_M, MMA_K=kBlockN)
    gemm_reg_smem(tiled_mma, acc_o, tOrP, tOrVt, smem_thr_copy_v.partition_S(sVt_at(stage)), smem_copy_v, tid);
    if constexpr (kStagesKV == 2) stage ^= 1;
  };
  // Blocks right of the first row's window edge (or past seqlen_k) and blocks straddling the last
  // row's left window edge (none without a left bound) take the mask; the middle does not. One
  // loop with a uniform branch, not a loop per range: a third inlined copy of the masked body
  // costs the d = 64 kernels (at 255 registers) a few hundred bytes of spills.
  for (; n_block >= n_block_begin; --n_block) {
    if (n_block >= n_block_unmasked || n_block < n_block_unmasked_begin) {
      process_key_block(n_block, std::true_type{});
    } else {
      process_key_block(n_block, std::false_type{});
    }
  }

  // Epilogue: normalise, stage O through Q's shared memory, store rows that exist; LSE.
  float lse[kRows];
  Tensor tScS_rc = make_tensor(tScS.data(), accumulator_as_rows_cols(tScS.layout()));  // (rows, cols) -> coords
  softmax.finalize(acc_o, kScoreMod ? params.score_unit : params.softmax_scale, lse,
                   [&](int r) { return mask.row_sees_a_key(m0 + get<0>(tScS_rc(r, 0))); });
  if constexpr (kScoreMod) {
    if (params.has_dropout) {
      CUTE_UNROLL
      for (int i = 0; i < size(acc_o); ++i) acc_o(i) *= params.dropout_scale;
    }
  }
  store_output<Traits>(params, seq, acc_o, lse, tiled_mma, sQ, gO, m0, head, batch, tid);
}

}  // namespace flashcore::cuda::sm80
