// The order of a varlen backward's key blocks (issue 16; bwd_sequence.h's BwdWork). In default mode
// a CTA computes one key block of one sequence and head, and the cost of a key block is the query
// blocks it sweeps: every query block of its sequence, or causally only those at or below the
// diagonal, so key block 0 of a long sequence costs up to ~60 times the last block of a short one.
// This kernel writes the work list the grid's x walks: entry i = (sequence, key block) of CTA x = i,
// (-1, 0) past the last key block (the CTA exits). Every head's CTAs (grid y) walk the same list.
// Orders (BwdVarlenOrderMode, chosen by bwd_varlen_order_mode(), FLASHCORE_BWD_VARLEN_ORDER):
//   kSequences (default): the sequences longest first, each one's key blocks together from block 0
//     (the heaviest when causal), so the CTAs running together share a sequence's Q/dO in L2;
//   kBlocks: every key block by its own cost, heaviest first (LPT over the blocks);
//   kSlots: the cu_seqlens order of session 11.
// Measured on an H200 (docs/tuning/backward_sm90.md, varlen runs 5-6; 20 sequences of 151..3626,
// d128 bf16): the three orders within ~3 % of each other in the causal backward (0.72-0.76x the
// padded dense call), against the list-schedule model's +0.03-0.04 for LPT: the balance of the grid
// is not what holds causal varlen below dense. kSequences is kept as the default: the heaviest
// blocks first without giving up the L2 sharing of the cu_seqlens order.
//
// One CTA, run before the main kernel on the same stream (a few microseconds on a ~1-3 ms call): a
// counting sort. kBlocks enumerates the key blocks by the slot rule (FwdVarlenSlots' rule over
// cu_seqlens_k: sequence b owns slots [cu_k[b] / kBlockN + b, cu_k[b + 1] / kBlockN + b + 1), its
// key blocks and at most one empty slot), so at most `slots` entries whatever the offsets are;
// kSequences drops the entries past `slots` that overlapping (bad) offsets would ask for. Offsets are
// clamped by sequence_rows (common/seqlen.h). Ties keep no fixed order (atomics); the default
// mode's dQ sum has none either, and deterministic mode does not use this list.
#pragma once

#include "cuda/common/seqlen.h"

namespace flashcore::cuda::sm90 {

// kBlocks: every key block by its own cost, heaviest first (LPT over blocks). kSequences: the
// sequences by length, longest first, each one's key blocks together from block 0 (the heaviest
// when causal), so the CTAs running together still share a sequence's Q/dO in L2. kSlots: the
// cu_seqlens order of session 11 (A/B runs). bwd_varlen_order_mode() (bwd_workspace.cu) chooses.
enum class BwdVarlenOrderMode { kBlocks, kSequences, kSlots };
BwdVarlenOrderMode bwd_varlen_order_mode();

struct BwdVarlenOrderParams {
  const int* cu_seqlens_q;
  const int* cu_seqlens_k;
  int batch;
  int total_q, total_k;
  int max_seqlen_q, max_seqlen_k;
  int slots;  // entries of `work` (BwdWork::slots)
  int2* work;
  BwdVarlenOrderMode mode;
};

constexpr int kVarlenOrderThreads = 1024;
// Costs above this many query blocks share the last bin (max_seqlen_q > 131k at 64-row blocks);
// the order is then longest first up to that length.
constexpr int kVarlenOrderBins = 2048;

template <int kBlockM, int kBlockN, bool kCausal>
struct BwdVarlenOrder {
  // The sequence owning slot `slot` (common/seqlen.h: sequence_of_slot), and the key block.
  __device__ static int2 block_of_slot(BwdVarlenOrderParams const& p, int slot) {
    if (p.batch <= 0) return {-1, 0};
    auto slot0 = [&](int b) { return sequence_row<OffsetLoad::Cached>(p.cu_seqlens_k, b, p.total_k) / kBlockN + b; };
    const int b = sequence_of_slot(p.batch, slot, slot0);
    return {b, slot - slot0(b)};
  }

  // (seqlen_q, seqlen_k) of sequence b, clamped.
  __device__ static int2 lengths(BwdVarlenOrderParams const& p, int b) {
    return {sequence_rows<OffsetLoad::Cached>(p.cu_seqlens_q, b, p.total_q, p.max_seqlen_q).len,
            sequence_rows<OffsetLoad::Cached>(p.cu_seqlens_k, b, p.total_k, p.max_seqlen_k).len};
  }
  // kSequences' bin: the sequence's query blocks (its key blocks' cost, non-causal).
  __device__ static int sequence_bin(int2 len) { return min((len.x + kBlockM - 1) / kBlockM, kVarlenOrderBins - 1); }

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
  if (p.mode == BwdVarlenOrderMode::kSlots) {
    for (int slot = tid; slot < p.slots; slot += kVarlenOrderThreads) {
      const int2 blk = Order::block_of_slot(p, slot);
      p.work[slot] = Order::cost(p, blk) >= 0 ? blk : make_int2(-1, 0);
    }
    return;
  }
  const bool by_sequence = p.mode == BwdVarlenOrderMode::kSequences;
  for (int r = tid; r < kVarlenOrderBins; r += kVarlenOrderThreads) next[r] = 0;
  __syncthreads();
  if (by_sequence) {  // bins count key blocks; a sequence's bin is its query blocks
    for (int i = tid; i < p.slots; i += kVarlenOrderThreads) p.work[i] = make_int2(-1, 0);
    for (int b = tid; b < p.batch; b += kVarlenOrderThreads) {
      const int2 len = Order::lengths(p, b);
      atomicAdd(&next[kVarlenOrderBins - 1 - Order::sequence_bin(len)], (len.y + kBlockN - 1) / kBlockN);
    }
  } else {
    for (int slot = tid; slot < p.slots; slot += kVarlenOrderThreads) {
      const int c = Order::cost(p, Order::block_of_slot(p, slot));
      if (c >= 0) atomicAdd(&next[kVarlenOrderBins - 1 - c], 1);
    }
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

  if (by_sequence) {
    // A sequence's blocks take one run of entries. Bad offsets (overlapping sequences) can ask for
    // more than `slots` entries: those past the end are dropped, the rest of the list stays -1.
    for (int b = tid; b < p.batch; b += kVarlenOrderThreads) {
      const int2 len = Order::lengths(p, b);
      const int n_blocks = (len.y + kBlockN - 1) / kBlockN;
      const int base = atomicAdd(&next[kVarlenOrderBins - 1 - Order::sequence_bin(len)], n_blocks);
      for (int j = 0; j < n_blocks && base + j < p.slots; ++j) p.work[base + j] = make_int2(b, j);
    }
    return;
  }
  for (int slot = tid; slot < p.slots; slot += kVarlenOrderThreads) {
    const int2 blk = Order::block_of_slot(p, slot);
    const int c = Order::cost(p, blk);
    if (c >= 0) p.work[atomicAdd(&next[kVarlenOrderBins - 1 - c], 1)] = blk;
  }
  for (int i = entries + tid; i < p.slots; i += kVarlenOrderThreads) p.work[i] = make_int2(-1, 0);
}

}  // namespace flashcore::cuda::sm90
