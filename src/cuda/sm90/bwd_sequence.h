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
// Scheduling, default mode (one key block per CTA): the grid's x walks a work list of (sequence,
// key block), the sequences longest first, which bwd_varlen_order.h writes into the workspace
// before the kernel runs; it has total_k / kBlockN + batch entries (a bound on the key blocks of any clamped
// offsets), those past the last key block -1, whose CTAs exit at once. So no CTA is launched for
// max_seqlen_k's grid of a short sequence, and the heaviest key blocks start first. Deterministic
// mode keeps the (dq_accum slices, heads, batch) grid; a CTA walks its sequence's key blocks x,
// x + gridDim.x, ...
// Lengths and offsets come from common/seqlen.h's sequence_rows, clamped to the packed tensors and
// max_seqlen: offsets on the GPU are not validated.
#pragma once

#include <type_traits>

#include "cuda/common/seqlen.h"

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

struct BwdSequence : SequenceExtent {
  int tma_batch;  // the batch coordinate of the TMA tensors (0 varlen)

  template <class Params>
  __forceinline__ __device__ BwdSequence(Params const& params, int batch) {
    if (!bwd_is_varlen(params)) {
      set_dense(params);
      tma_batch = batch;
    } else if constexpr (BwdParamsHaveVarlen<Params>::value) {
      set_varlen<OffsetLoad::Volatile>(params, batch);
      tma_batch = 0;
    }
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

  // Default mode (single_block): the CTA's (sequence, key block) is entry blockIdx.x of the
  // work list bwd_varlen_order.h wrote (an entry of -1: no work, the CTA exits).
  // Deterministic mode: sequence blockIdx.z, key blocks blockIdx.x, blockIdx.x + gridDim.x, ...
  template <int kBlockN, class Params>
  __forceinline__ __device__ static BwdWork of(Params const& params, bool single_block) {
    if (!bwd_is_varlen(params)) return dense(params);
    int b, first;
    if (single_block) {
      const int2 entry = load_work(params.varlen_work + int(blockIdx.x));
      b = entry.x;
      first = entry.y;
      if (b < 0 || b >= params.batch) return {0, 0, 0};
    } else {
      b = int(blockIdx.z);
      first = int(blockIdx.x);
    }
    const int seqlen_k =
        sequence_rows<OffsetLoad::Volatile>(params.cu_seqlens_k, b, params.total_k, params.seqlen_k).len;
    return {b, first, (seqlen_k + kBlockN - 1) / kBlockN};
  }

  // Key blocks this CTA walks with a stride of gridDim.x (deterministic mode; at most 1 otherwise).
  __forceinline__ __device__ int iterations() const {
    return first_n_block < n_blocks ? (n_blocks - first_n_block + int(gridDim.x) - 1) / int(gridDim.x) : 0;
  }

  // Entries of the work order, the default grid's x (bwd_varlen_order.h): total_k / kBlockN + batch
  // bounds the key blocks of any offsets clamped to [0, total_k].
  __host__ __device__ static int slots(int total_k, int batch, int block_n) { return total_k / block_n + batch; }

 private:
  // A volatile load, as sequence_rows': each warpgroup reads its entry anew after setmaxnreg.
  __forceinline__ __device__ static int2 load_work(int2 const* p) {
    int2 v;
    asm volatile("ld.global.nc.v2.b32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
  }
};

}  // namespace flashcore::cuda::sm90
