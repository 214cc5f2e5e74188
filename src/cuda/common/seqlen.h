// The lengths and first rows of one sequence of a call: every sequence seqlen_q x seqlen_k in the
// dense layout (rows reached through the batch stride), or, with cu_seqlens (attention.h,
// "varlen"), sequence b's own lengths and the first rows of its slices of the packed tensors
// (whose batch strides are then 0). Kernels read these instead of params.seqlen_q / seqlen_k,
// which are the grids' bounds (max_seqlen) in the packed layout.
//
// sequence_rows is the one rule every kernel uses to read a sequence's rows from cu_seqlens
// (SeqlenInfo here, sm90's FwdSequence, BwdSequence and BwdWork): offsets on the GPU are not
// validated (attention.h), so each offset is clamped to the packed tensor's rows [0, total] and the
// length to [0, max_len]. Then rows [row, row + len) lie inside the tensor whatever the offsets
// (past total, negative, not increasing): a bad offset gives a wrong or empty sequence, never an
// access outside the tensors.
#pragma once

#include <cstdint>

#include "cuda/params.h"

namespace flashcore::cuda {

// How sequence_rows reads an offset. Cached: an ordinary load, which the compiler may merge with
// another read of the same offset or hold in a register. Volatile: ld.global.nc issued anew at each
// call, so a kernel can build its sequence where it needs it (the sm90 epilogue after the mainloop)
// instead of holding its rows in registers through the mainloop.
enum class OffsetLoad { Cached, Volatile };

template <OffsetLoad kLoad>
__forceinline__ __device__ int load_offset(const int* cu_seqlens, int b) {
  if constexpr (kLoad == OffsetLoad::Volatile) {
    int v;
    asm volatile("ld.global.nc.b32 %0, [%1];" : "=r"(v) : "l"(cu_seqlens + b));
    return v;
  } else {
    return cu_seqlens[b];
  }
}

// Offset b clamped to the packed tensor's rows.
template <OffsetLoad kLoad>
__forceinline__ __device__ int sequence_row(const int* cu_seqlens, int b, int total) {
  return min(max(load_offset<kLoad>(cu_seqlens, b), 0), total);
}

struct SequenceRows {
  int row;  // first row of sequence b in the packed tensor, in [0, total]
  int len;  // its length, in [0, min(max_len, total - row)]
};

template <OffsetLoad kLoad>
__forceinline__ __device__ SequenceRows sequence_rows(const int* cu_seqlens, int b, int total, int max_len) {
  const int row = sequence_row<kLoad>(cu_seqlens, b, total);
  const int next = sequence_row<kLoad>(cu_seqlens, b + 1, total);
  return {row, max(min(next - row, max_len), 0)};
}

// The sequence owning slot `slot` of a varlen grid whose sequence b starts at slot slot0(b): the
// last b in [0, batch) with slot0(b) <= slot (slot0 is non-decreasing for valid offsets; for bad ones
// the search still ends on some b in [0, batch)). batch >= 1.
template <class SlotStart>
__forceinline__ __device__ int sequence_of_slot(int batch, int slot, SlotStart const& slot0) {
  int lo = 0, hi = batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (slot0(mid) <= slot) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// One sequence's lengths and first rows in q and k, dense or read by sequence_rows (sm90's
// FwdSequence and BwdSequence build on it; the first rows index the packed tensors' rows and the
// tensors paired with each: out, the LSE and dout with q, v and the key gradients with k).
struct SequenceExtent {
  int seqlen_q;
  int seqlen_k;
  int row_q;  // 0 dense
  int row_k;  // 0 dense

  template <class Params>
  __forceinline__ __device__ void set_dense(Params const& params) {
    seqlen_q = params.seqlen_q;
    seqlen_k = params.seqlen_k;
    row_q = 0;
    row_k = 0;
  }

  template <OffsetLoad kLoad, class Params>
  __forceinline__ __device__ void set_varlen(Params const& params, int batch) {
    const SequenceRows q = sequence_rows<kLoad>(params.cu_seqlens_q, batch, params.total_q, params.seqlen_q);
    const SequenceRows k = sequence_rows<kLoad>(params.cu_seqlens_k, batch, params.total_k, params.seqlen_k);
    row_q = q.row;
    row_k = k.row;
    seqlen_q = q.len;
    seqlen_k = k.len;
  }
};

struct SeqlenInfo {
  int seqlen_q;
  int seqlen_k;
  std::int64_t row_q;  // first row of the sequence in q, out, dout, dq and the LSE (0 dense)
  std::int64_t row_k;  // ... in k, v, dk and dv

  __forceinline__ __device__ SeqlenInfo(const ProblemParams& params, int batch) {
    if (params.cu_seqlens_q == nullptr) {
      seqlen_q = params.seqlen_q;
      seqlen_k = params.seqlen_k;
      row_q = 0;
      row_k = 0;
    } else {
      const SequenceRows q =
          sequence_rows<OffsetLoad::Cached>(params.cu_seqlens_q, batch, params.total_q, params.seqlen_q);
      const SequenceRows k =
          sequence_rows<OffsetLoad::Cached>(params.cu_seqlens_k, batch, params.total_k, params.seqlen_k);
      seqlen_q = q.len;
      seqlen_k = k.len;
      row_q = q.row;
      row_k = k.row;
    }
  }
};

}  // namespace flashcore::cuda
