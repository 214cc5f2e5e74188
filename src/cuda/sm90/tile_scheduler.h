// Which (m_block, head, batch) tiles a CTA works on.
//
// Persistent: the grid has min(#tiles, #SMs) CTAs and CTA i takes tiles i, i + gridDim.x, ...
// Otherwise one tile per CTA, the hardware block scheduler balancing.
// Order, non-causal: m_block fastest, so the CTAs running together share a head's K/V in L2.
// Order, causal (tiles of unequal cost): longest first. One tile per CTA: m_blocks reversed
// within each head, the short tiles of a head filling in behind the long ones. Persistent: the
// whole list sorted by cost (m_block reversed, slowest), so the static stride hands every CTA
// nearly the same sequence of costs.
//
// FwdZigZagScheduler (causal, persistent): a work item is the pair of m_blocks (num_m-1-i, i) of
// one head, whose causal costs add up to about the same for every i, so the static stride over
// items balances without a counter; items are head-major, so the CTAs running together share a
// few heads' K/V in L2. With an odd num_m the middle m_block of each head has no partner in its
// head: the middle blocks of heads 2j and 2j+1 form one item instead (after all the pairs), so
// every item costs about num_m + 1 key blocks (a half-cost item per head would land on the same
// CTAs on every round whenever the items per head divide the grid: 11 m_blocks, 132 SMs).
// A tile is encoded as item * 2 + (0: the first m_block of the item, 1: the second).
//
// FwdClusterScheduler (non-causal, clusters of kClusterM CTAs along M): a work item is a group of
// kClusterM neighbouring m_blocks of one head, the cluster's CTA of rank r taking m_block
// kClusterM * i + r, so the CTAs of a cluster share every K/V tile; persistent, static stride over
// items. With num_m_blocks not a multiple of kClusterM the last group of a head has a CTA past
// seqlen_q: it still loads and consumes its share (zero-filled Q), and its epilogue writes nothing.
//
// Varlen (FwdTileScheduler and FwdZigZagScheduler; FwdVarlenSlots): the work items are the
// sequences' own m_blocks (causal: zig-zag pairs of them), not max_seqlen_q's grid of every
// sequence, and every kernel runs one item per CTA, the persistent ones too (a runtime choice, no
// kernel added): an item costs about its sequence's key blocks, and a static stride over items of
// unequal cost left CTAs idle (0.74x the padded dense call's TFLOP/s on the H100, lengths
// 151..3626; docs/tuning/forward_sm90.md v11), where the hardware's block scheduler hands the next
// item to whichever SM is free.
#pragma once

#include <cutlass/fast_math.h>

#include "cuda/common/seqlen.h"

namespace flashcore::cuda::sm90 {

struct FwdTile {
  int m_block;
  int head;
  int batch;
};

// The m_blocks of a varlen call as "slots" of slot_rows query rows (block_m, or 2 * block_m for
// FwdZigZagScheduler's pairs of m_blocks): sequence b takes slots [slot0(b), slot0(b + 1)) with
// slot0(b) = cu_seqlens_q[b] / slot_rows + b, which is ceil(len_b / slot_rows) slots or one more,
// so a work item's sequence is a binary search over cu_seqlens_q (no prefix sum over the batch, no
// workspace) and at most one slot per sequence is empty (skipped). Item = slot * heads + head: the
// heads of an m_block run together. Slots: total_q / slot_rows + batch. Lengths and offsets clamped
// as fwd_sequence.h does. The divisions are FastDivmods built on the host: a division by a runtime
// value has its reciprocal hoisted out of the persistent loop by the compiler, and the registers
// that holds spilled the 128 x 176 d128 tile.
struct FwdVarlenSlots {
  const int* cu_seqlens_q = nullptr;  // null: a dense call
  int batch = 0;
  int max_seqlen_q = 0;
  int total_q = 0;
  int slots = 0;
  cutlass::FastDivmod block_m = {};
  cutlass::FastDivmod slot_rows = {};
  cutlass::FastDivmod heads = {};

  // One work item: sequence b's slot `local` (0-based within the sequence; may be past its work),
  // for head `head`; the sequence has m_blocks m_blocks.
  struct Item {
    int batch, head, local, m_blocks;
  };

  __host__ __device__ bool on() const { return cu_seqlens_q != nullptr; }
  __device__ int row(int b) const { return sequence_row<OffsetLoad::Cached>(cu_seqlens_q, b, total_q); }
  __device__ static int div(cutlass::FastDivmod const& d, int x) {
    int q, r;
    d(q, r, x);
    return q;
  }
  __device__ int slot0(int b) const { return div(slot_rows, row(b)) + b; }
  __device__ int m_blocks(int b) const {
    const int len = max(min(row(b + 1) - row(b), max_seqlen_q), 0);
    return div(block_m, len + block_m.divisor - 1);
  }
  // The sequence holding `slot`: the last b with slot0(b) <= slot.
  __device__ int sequence_of(int slot) const {
    return sequence_of_slot(batch, slot, [this](int b) { return slot0(b); });
  }
  __device__ Item item(int index) const {
    int slot, head;
    heads(slot, head, index);
    const int b = sequence_of(slot);
    return {b, head, slot - slot0(b), m_blocks(b)};
  }
  // One m_block per slot (slot_rows = block_m); m_block -1: an empty slot. reversed: the
  // sequence's m_blocks from its last (causal: longest first within the sequence).
  __device__ FwdTile decode(int tile, bool reversed) const {
    const Item it = item(tile);
    if (it.local < 0 || it.local >= it.m_blocks) return {-1, it.head, it.batch};
    return {reversed ? it.m_blocks - 1 - it.local : it.local, it.head, it.batch};
  }
  static FwdVarlenSlots make(const int* cu_seqlens_q, int batch, int max_seqlen_q, int total_q, int heads,
                             int block_m, int slot_rows) {
    return {cu_seqlens_q, batch, max_seqlen_q, total_q, total_q / slot_rows + batch, cutlass::FastDivmod(block_m),
            cutlass::FastDivmod(slot_rows), cutlass::FastDivmod(heads)};
  }
};

template <bool kPersistent, bool kCausalOrder>
struct FwdTileScheduler {
  int num_m_blocks;
  int heads;
  int batch;
  FwdVarlenSlots varlen = {};
  static constexpr bool kServesVarlen = true;
  static constexpr int kSlotMBlocks = 1;  // m_blocks a varlen slot holds

  __host__ __device__ int num_tiles() const {
    return varlen.on() ? varlen.slots * heads : num_m_blocks * heads * batch;
  }

  __host__ static int grid_size(int num_tiles, int sm_count) {
    return kPersistent ? (num_tiles < sm_count ? num_tiles : sm_count) : num_tiles;
  }

  // The grid: varlen one CTA per tile (above).
  __host__ int grid(int sm_count) const { return varlen.on() ? num_tiles() : grid_size(num_tiles(), sm_count); }

  // Varlen: a CTA whose slot is empty gets no tile.
  __device__ int first_tile() const {
    const int tile = int(blockIdx.x);
    return varlen.on() && valid(tile) && varlen.decode(tile, kCausalOrder).m_block < 0 ? num_tiles() : tile;
  }
  __device__ int next_tile(int tile) const { return kPersistent && !varlen.on() ? tile + int(gridDim.x) : num_tiles(); }
  __device__ bool valid(int tile) const { return tile < num_tiles(); }

  __device__ FwdTile decode(int tile) const {
    if (varlen.on()) return varlen.decode(tile, kCausalOrder);
    int m, head_batch;
    if constexpr (kCausalOrder && kPersistent) {
      head_batch = tile % (heads * batch);
      m = num_m_blocks - 1 - tile / (heads * batch);
    } else {
      m = tile % num_m_blocks;
      head_batch = tile / num_m_blocks;
      if constexpr (kCausalOrder) m = num_m_blocks - 1 - m;
    }
    return {m, head_batch % heads, head_batch / heads};
  }
};

struct FwdZigZagScheduler {
  int num_m_blocks;
  int heads;
  int batch;
  // Varlen: an item is a pair (m_blocks - 1 - j, j) of one sequence and head (FwdVarlenSlots with
  // two m_blocks' rows a slot; the middle m_block of an odd count alone), one item per CTA: the
  // pairs of a sequence cost about the same, a sequence's about its length, and the hardware's
  // block scheduler balances items of unequal cost where a static stride did not (tile_scheduler.h's
  // top). The pair's second tile still has its Q prefetched during the first.
  FwdVarlenSlots varlen = {};
  static constexpr bool kServesVarlen = true;
  static constexpr int kSlotMBlocks = 2;  // m_blocks a varlen slot holds

  __host__ __device__ int pairs_per_head() const { return num_m_blocks / 2; }
  __host__ __device__ int num_pair_items() const { return pairs_per_head() * heads * batch; }
  // Items holding the middle m_blocks of two heads (odd num_m_blocks only).
  __host__ __device__ int num_middle_items() const { return (num_m_blocks & 1) ? (heads * batch + 1) / 2 : 0; }
  __host__ __device__ int num_items() const {
    return varlen.on() ? varlen.slots * heads : num_pair_items() + num_middle_items();
  }
  __host__ int num_tiles() const { return num_items(); }  // what the grid is sized by

  __host__ static int grid_size(int num_items, int sm_count) { return num_items < sm_count ? num_items : sm_count; }
  __host__ int grid(int sm_count) const { return varlen.on() ? num_items() : grid_size(num_items(), sm_count); }

  // Varlen: sequence's pair j of the item, or j >= its pair count (an empty item).
  __device__ bool varlen_empty(FwdVarlenSlots::Item const& it) const {
    return it.local < 0 || it.local >= (it.m_blocks + 1) / 2;
  }

  __device__ int first_tile() const {
    const int tile = int(blockIdx.x) * 2;
    if (varlen.on() && valid(tile) && varlen_empty(varlen.item(tile >> 1))) return num_items() * 2;
    return tile;
  }
  __device__ int next_tile(int tile) const {
    const int item = tile >> 1;
    if (varlen.on()) {
      const FwdVarlenSlots::Item it = varlen.item(item);
      const bool has_second = it.m_blocks - 1 - it.local != it.local;
      return (tile & 1) == 0 && has_second ? tile + 1 : num_items() * 2;
    }
    // The second tile of an item exists except for the last middle item of an odd head count.
    const bool has_second = item < num_pair_items() || 2 * (item - num_pair_items()) + 1 < heads * batch;
    if ((tile & 1) == 0 && has_second) return tile + 1;
    return (item + int(gridDim.x)) * 2;
  }
  __device__ bool valid(int tile) const { return (tile >> 1) < num_items(); }

  __device__ FwdTile decode(int tile) const {
    const int item = tile >> 1;
    if (varlen.on()) {
      const FwdVarlenSlots::Item it = varlen.item(item);
      return {(tile & 1) ? it.local : it.m_blocks - 1 - it.local, it.head, it.batch};
    }
    int m, head_batch;
    if (item < num_pair_items()) {
      const int i = item % pairs_per_head();
      head_batch = item / pairs_per_head();
      m = (tile & 1) ? i : num_m_blocks - 1 - i;
    } else {
      head_batch = 2 * (item - num_pair_items()) + (tile & 1);
      m = num_m_blocks / 2;
    }
    return {m, head_batch % heads, head_batch / heads};
  }
};

template <int kClusterM>
struct FwdClusterScheduler {
  int num_m_blocks;
  int heads;
  int batch;
  static constexpr bool kServesVarlen = false;  // a cluster's CTAs walk one key range

  __host__ __device__ int m_groups() const { return (num_m_blocks + kClusterM - 1) / kClusterM; }
  __host__ __device__ int num_tiles() const { return m_groups() * heads * batch; }  // work items

  // max_clusters: how many clusters of this kernel the GPU holds at once.
  __host__ static int grid_size(int num_items, int max_clusters) {
    return (num_items < max_clusters ? num_items : max_clusters) * kClusterM;
  }

  // A 1-D cluster along x: blockIdx.x / kClusterM is the cluster, blockIdx.x % kClusterM the rank.
  __device__ int first_tile() const { return int(blockIdx.x) / kClusterM; }
  __device__ int next_tile(int item) const { return item + int(gridDim.x) / kClusterM; }
  __device__ bool valid(int item) const { return item < num_tiles(); }

  __device__ FwdTile decode(int item) const {
    const int m = (item % m_groups()) * kClusterM + int(blockIdx.x) % kClusterM;
    const int head_batch = item / m_groups();
    return {m, head_batch % heads, head_batch / heads};
  }
};

}  // namespace flashcore::cuda::sm90
