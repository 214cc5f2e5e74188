// The longest-first order of a varlen backward's key blocks (issue 16; bwd_sequence.h's BwdWork).
// In default mode a CTA computes one key block of one sequence and head, and the cost of a key block
// is the query blocks it sweeps: every query block of its sequence, or causally only those at or
// below the diagonal, so key block 0 of a long sequence costs up to ~60 times the last block of a
// short one. In the cu_seqlens order the heaviest blocks start wherever their sequence falls, the
// last sequence's near the end of the grid, and the SMs that drew them finish long after the rest
// (H100, 20 sequences of 151..3626: causal 0.71x the padded dense call; the same lengths sorted
// longest first 0.76x; docs/tuning/backward_sm90.md, varlen runs 1-2). This kernel writes the work
// list sorted by cost, heaviest first (LPT: a list schedule, which the hardware's block scheduler
// is, then ends with the short blocks filling in): entry i = (sequence, key block) of the grid's
// CTA x = i, (-1, 0) past the last key block (the CTA exits). Each head's CTAs (grid y) walk the
// same list, so the tail of the grid is the last head's cheapest blocks.
//
// One CTA, run before the main kernel on the same stream (a few microseconds on a ~1-3 ms call): a
// counting sort by cost. The key blocks are enumerated by the slot rule (FwdVarlenSlots' rule over
// cu_seqlens_k: sequence b owns slots [cu_k[b] / kBlockN + b, cu_k[b + 1] / kBlockN + b + 1), its
// key blocks and at most one empty slot), so at most `slots` entries whatever the offsets are:
// offsets are clamped by sequence_rows (common/seqlen.h), and a non-monotone list still gives each
// slot at most one in-bounds (sequence, key block). Ties keep no fixed order (atomics); the default
// mode's dQ sum has none either, and deterministic mode does not use this list.
#pragma once

#include "cuda/common/seqlen.h"

namespace flashcore::cuda::sm90 {

struct BwdVarlenOrderParams {
  const int* cu_seqlens_q;
  const int* cu_seqlens_k;
  int batch;
  int total_q, total_k;
  int max_seqlen_q, max_seqlen_k;
  int slots;  // entries of `work` (BwdWork::slots)
  int2* work;
  // false: the slots in cu_seqlens order, as before this kernel (FLASHCORE_BWD_VARLEN_ORDER=slots,
  // for A/B runs; bwd_launch_template.h).
  bool longest_first;
};

constexpr int kVarlenOrderThreads = 1024;
// Costs above this many query blocks share the last bin (max_seqlen_q > 131k at 64-row blocks);
// the order is then longest first up to that length.
constexpr int kVarlenOrderBins = 2048;

template <int kBlockM, int kBlockN, bool kCausal>
struct BwdVarlenOrder {
  // The sequence owning slot `slot` (last b with slot0(b) <= slot; slot0 is non-decreasing for valid
  // offsets, and for bad ones the search still ends on some b in [0, batch)), and the key block.
  __device__ static int2 block_of_slot(BwdVarlenOrderParams const& p, int slot) {
    if (p.batch <= 0) return {-1, 0};
    auto slot0 = [&](int b) { return sequence_row<OffsetLoad::Cached>(p.cu_seqlens_k, b, p.total_k) / kBlockN + b; };
    int lo = 0, hi = p.batch - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (slot0(mid) <= slot) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return {lo, slot - slot0(lo)};
  }

  // Query blocks key block j of sequence b sweeps (its cost), or -1 if the slot holds no key block.
  __device__ static int cost(BwdVarlenOrderParams const& p, int2 blk) {
    if (blk.x < 0) return -1;
    const int seqlen_k = sequence_rows<OffsetLoad::Cached>(p.cu_seqlens_k, blk.x, p.total_k, p.max_seqlen_k).len;
    if (blk.y < 0 || blk.y * kBlockN >= seqlen_k) return -1;  // the slot past the sequence's key blocks
    const int seqlen_q = sequence_rows<OffsetLoad::Cached>(p.cu_seqlens_q, blk.x, p.total_q, p.max_seqlen_q).len;
    const int m_blocks = (seqlen_q + kBlockM - 1) / kBlockM;
    int first_m = 0;
    if constexpr (kCausal) {  // bottom-right: query i sees key j * kBlockN once i >= j * kBlockN - (Sk - Sq)
      const int first_row = max(blk.y * kBlockN - (seqlen_k - seqlen_q), 0);
      first_m = min(first_row / kBlockM, m_blocks);
    }
    return min(m_blocks - first_m, kVarlenOrderBins - 1);
  }
};

// Grid: one CTA of kVarlenOrderThreads.
template <int kBlockM, int kBlockN, bool kCausal>
__global__ void __launch_bounds__(kVarlenOrderThreads) bwd_varlen_order_kernel(BwdVarlenOrderParams p) {
  using Order = BwdVarlenOrder<kBlockM, kBlockN, kCausal>;
  constexpr int kBinsPerThread = kVarlenOrderBins / kVarlenOrderThreads;
  static_assert(kVarlenOrderBins % kVarlenOrderThreads == 0);
  // Bins by rank: rank r holds cost kVarlenOrderBins - 1 - r, so an ascending scan is longest first.
  __shared__ int next[kVarlenOrderBins];  // counts, then each bin's next free entry
  __shared__ int warp_sums[kVarlenOrderThreads / 32];
  const int tid = int(threadIdx.x);
  if (!p.longest_first) {
    for (int slot = tid; slot < p.slots; slot += kVarlenOrderThreads) {
      const int2 blk = Order::block_of_slot(p, slot);
      p.work[slot] = Order::cost(p, blk) >= 0 ? blk : make_int2(-1, 0);
    }
    return;
  }
  for (int r = tid; r < kVarlenOrderBins; r += kVarlenOrderThreads) next[r] = 0;
  __syncthreads();
  for (int slot = tid; slot < p.slots; slot += kVarlenOrderThreads) {
    const int c = Order::cost(p, Order::block_of_slot(p, slot));
    if (c >= 0) atomicAdd(&next[kVarlenOrderBins - 1 - c], 1);
  }
  __syncthreads();

  // Exclusive scan of the counts: thread t owns ranks [t * kBinsPerThread, (t + 1) * kBinsPerThread).
  int counts[kBinsPerThread];
  int own = 0;
  for (int i = 0; i < kBinsPerThread; ++i) {
    counts[i] = next[tid * kBinsPerThread + i];
    own += counts[i];
  }
  const int lane = tid % 32, warp = tid / 32;
  int inclusive = own;
  for (int d = 1; d < 32; d *= 2) {
    const int up = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) inclusive += up;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int w = warp_sums[lane];
    for (int d = 1; d < 32; d *= 2) {
      const int up = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += up;
    }
    warp_sums[lane] = w;  // inclusive over warps
  }
  __syncthreads();
  int start = inclusive - own + (warp > 0 ? warp_sums[warp - 1] : 0);
  for (int i = 0; i < kBinsPerThread; ++i) {
    next[tid * kBinsPerThread + i] = start;
    start += counts[i];
  }
  const int entries = warp_sums[kVarlenOrderThreads / 32 - 1];
  __syncthreads();

  for (int slot = tid; slot < p.slots; slot += kVarlenOrderThreads) {
    const int2 blk = Order::block_of_slot(p, slot);
    const int c = Order::cost(p, blk);
    if (c >= 0) p.work[atomicAdd(&next[kVarlenOrderBins - 1 - c], 1)] = blk;
  }
  for (int i = entries + tid; i < p.slots; i += kVarlenOrderThreads) p.work[i] = make_int2(-1, 0);
}

}  // namespace flashcore::cuda::sm90
