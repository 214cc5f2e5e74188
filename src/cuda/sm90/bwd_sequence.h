// The sequence of one backward key block and the key blocks a CTA walks (the varlen side of the
// d <= 128 backward; issue 16). Dense calls: every sequence is seqlen_q x seqlen_k, reached through
// the TMA tensors' batch mode, and the grid is (n_blocks, heads_kv * kv_splits, batch). Varlen calls
// (cu_seqlens): sequence b is rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of the packed
// (total, d, head, 1) tensors, so its Q/dO tiles are read from row row_q on and its K/V tile from
// row row_k on. A tile reaching past the sequence's end reads the next sequence's rows (or TMA's
// zero fill past the packed tensor):
//   - keys past seqlen_k: the mask (tile_needs_mask: n0 + kBlockN > seqlen_k) sets their P to
//     exactly 0, so dS = 0 too; their dK/dV rows are not stored (the epilogue's row bound);
//   - queries past seqlen_q: their lse_log2 is +inf and dsum 0 (the preprocess writes each
//     sequence's rows padded to seqlen_q_rounded, the workspace layout of the dense call with
//     batch = sequence), so P = exp2(s - inf) = 0 and dS = 0; their dQ rows are never converted.
// Only non-finite values in the next sequence's rows could still reach this sequence's sums (0 x
// NaN inside the wgmma), as in the sm90 varlen forward (docs/tuning/backward_sm90.md, varlen).
//
// Scheduling, default mode (one key block per CTA): the grid's x is the key-block "slots" of
// FwdVarlenSlots' rule: sequence b owns slots [cu_seqlens_k[b] / kBlockN + b, cu_seqlens_k[b + 1] /
// kBlockN + b + 1), its ceil(seqlen_k / kBlockN) key blocks and at most one empty slot (the CTA
// exits at once), so no CTA is launched for max_seqlen_k's grid of a short sequence. Every warp
// finds its slot's sequence by a 32-way search, one load a lane and a ballot a level: one level up
// to 32 sequences, two up to 1,024 (a binary search by one thread was ~5 dependent loads at the
// CTA's start, a scan of 32 offsets at a time batch / 64 levels on average). Deterministic mode keeps the
// (dq_accum slices, heads, batch) grid; a CTA walks its sequence's key blocks x, x + gridDim.x, ...
// Lengths and offsets are clamped as fwd_sequence.h does: offsets on the GPU are not validated.
#pragma once

#include <type_traits>

namespace flashcore::cuda::sm90 {

// Whether a kernel's Params carry the varlen offsets (BwdTraits' do; the d > 128 kernels' own
// Params do not, and those kernels serve dense calls only: run_bwd refuses varlen there).
template <class Params, class = void>
struct BwdParamsHaveVarlen : std::false_type {};
template <class Params>
struct BwdParamsHaveVarlen<Params, std::void_t<decltype(Params::cu_seqlens_q), decltype(Params::cu_seqlens_k)>>
    : std::true_type {};
template <class Params>
__forceinline__ __device__ bool bwd_is_varlen(Params const& params) {
  if constexpr (BwdParamsHaveVarlen<Params>::value) {
    return params.cu_seqlens_q != nullptr;
  } else {
    return false;
  }
}

struct BwdSequence {
  int seqlen_q;
  int seqlen_k;
  int row_q;      // first row of the sequence in q and dout (0 dense)
  int row_k;      // ... in k, v, dk and dv
  int tma_batch;  // the batch coordinate of the TMA tensors (0 varlen)

  template <class Params>
  __forceinline__ __device__ BwdSequence(Params const& params, int batch) {
    if (!bwd_is_varlen(params)) {
      seqlen_q = params.seqlen_q;
      seqlen_k = params.seqlen_k;
      row_q = 0;
      row_k = 0;
      tma_batch = batch;
    } else if constexpr (BwdParamsHaveVarlen<Params>::value) {
      row_q = row(params.cu_seqlens_q, batch, params.total_q);
      row_k = row(params.cu_seqlens_k, batch, params.total_k);
      seqlen_q = max(min(row(params.cu_seqlens_q, batch + 1, params.total_q) - row_q, params.seqlen_q), 0);
      seqlen_k = max(min(row(params.cu_seqlens_k, batch + 1, params.total_k) - row_k, params.seqlen_k), 0);
      tma_batch = 0;
    }
  }

  // Offset b, clamped to the packed tensor's rows. A volatile load: each construction reads anew,
  // so the epilogue's row offsets are not held in registers through the mainloop.
  __forceinline__ __device__ static int row(int const* cu_seqlens, int b, int total) {
    int v;
    asm volatile("ld.global.nc.b32 %0, [%1];" : "=r"(v) : "l"(cu_seqlens + b));
    return min(max(v, 0), total);
  }
};

// What a CTA works on: the sequence (batch) and its key blocks first_n_block, first_n_block +
// stride, ... below n_blocks. Built by every thread before the warp roles split.
struct BwdWork {
  int batch;
  int first_n_block;
  int n_blocks;  // key blocks of the sequence

  template <class Params>
  __forceinline__ __device__ static BwdWork dense(Params const& params) {
    return {int(blockIdx.z), int(blockIdx.x), params.n_blocks};
  }

  template <int kBlockN, class Params>
  __forceinline__ __device__ static BwdWork of(Params const& params, bool single_block) {
    if (!bwd_is_varlen(params)) return dense(params);
    const int b = single_block ? sequence_of_slot<kBlockN>(params, int(blockIdx.x)) : int(blockIdx.z);
    if (b < 0) return {0, 0, 0};
    const int k0 = BwdSequence::row(params.cu_seqlens_k, b, params.total_k);
    const int k1 = BwdSequence::row(params.cu_seqlens_k, b + 1, params.total_k);
    const int seqlen_k = max(min(k1 - k0, params.seqlen_k), 0);
    const int first = single_block ? int(blockIdx.x) - (k0 / kBlockN + b) : int(blockIdx.x);
    return {b, first, (seqlen_k + kBlockN - 1) / kBlockN};
  }

  // Key blocks this CTA walks with a stride of gridDim.x (deterministic mode; at most 1 otherwise).
  __forceinline__ __device__ int iterations() const {
    return first_n_block < n_blocks ? (n_blocks - first_n_block + int(gridDim.x) - 1) / int(gridDim.x) : 0;
  }

  // The sequence owning key-block slot `slot`: the last b with slot0(b) = cu_seqlens_k[b] / kBlockN
  // + b <= slot (slot0 is non-decreasing for valid offsets); -1 if none. Whole warp, every lane
  // gets the answer: a 32-way search, each level one load a lane and a ballot, so log32(batch)
  // levels (a scan of 32 offsets at a time took batch / 64 levels on average: 16 at 1,000 short
  // sequences, more than such a CTA's own work). Checked against a linear scan by a host emulation
  // (every slot of 3,000 random batches of 1..3,000 sequences, empty ones included).
  template <int kBlockN, class Params>
  __forceinline__ __device__ static int sequence_of_slot(Params const& params, int slot) {
    const int lane = int(threadIdx.x) % 32;
    auto at_or_before = [&](int b) {
      return BwdSequence::row(params.cu_seqlens_k, b, params.total_k) / kBlockN + b <= slot;
    };
    // The answer lies in [lo - 1, hi): lo - 1 is known to qualify (or is -1), hi not to.
    int lo = 0, hi = params.batch;
    while (hi - lo > 32) {
      const int step = (hi - lo + 31) / 32;
      const int b = lo + lane * step;
      const int count = __popc(__ballot_sync(0xffffffffu, b < hi && at_or_before(b)));
      if (count == 0) return lo - 1;  // lo does not qualify (at the first level: no sequence does)
      const int last = lo + (count - 1) * step;  // qualifies; last + step does not (or is past hi)
      hi = min(last + step, hi);
      lo = last + 1;
    }
    const int b = lo + lane;
    return lo - 1 + __popc(__ballot_sync(0xffffffffu, b < hi && at_or_before(b)));
  }

  // Slots of a varlen call (the default grid's x): total_k / kBlockN + batch.
  __host__ static int slots(int total_k, int batch, int block_n) { return total_k / block_n + batch; }
};

}  // namespace flashcore::cuda::sm90
