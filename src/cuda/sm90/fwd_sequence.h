// The sequence of one forward tile: its lengths, its first rows in the tensors TMA reads, and the
// causal row_offset of its tile grid. Dense calls: every sequence is seqlen_q x seqlen_k, reached
// through the TMA tensors' batch mode. Varlen calls (cu_seqlens): sequence b is rows
// [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of the packed (total, d, head, 1) tensors, so its tiles
// read from row row_q on; a tile that reaches past the sequence's last key reads the next
// sequence's keys (or TMA's zero fill past total_k), which the mask hides like any ragged key
// block (keys >= seqlen_k), and its query rows past seqlen_q are computed but never stored.
//
// Lengths and rows come from common/seqlen.h's sequence_rows, clamped to the grid's bounds
// (max_seqlen) and to the packed tensors: offsets on the GPU are not validated (attention.h), and a
// bad one must not make a store leave the tensor.
//
// Each construction reads the offsets anew (OffsetLoad::Volatile, which the compiler may not merge): the
// producer, the consumers' mainloop and the epilogue each build their own, so the epilogue's row
// offsets are not held in registers through the mainloop (the d128 128 x 176 and d256 tiles have
// none to spare: ptxas, 0 spills). Dense calls read kernel parameters, as before.
#pragma once

#include "cuda/common/seqlen.h"

namespace flashcore::cuda::sm90 {

template <class Traits>
struct FwdSequence : SequenceExtent {
  int tma_batch;   // the batch coordinate of the TMA tensors (0 varlen)
  int row_offset;  // causal: tile-grid rows above the first query (Traits::Params::row_offset),
                   // a multiple of 16 with dropout (Params::row_offset_mask)

  template <class Params>
  __forceinline__ __device__ FwdSequence(Params const& params, int batch) {
    if (params.cu_seqlens_q == nullptr) {
      set_dense(params);
      tma_batch = batch;
      row_offset = params.row_offset;
    } else {
      set_varlen<OffsetLoad::Volatile>(params, batch);
      tma_batch = 0;
      constexpr int kBlockM = Traits::kBlockM;
      row_offset =
          Traits::kIsCausal ? ((seqlen_q + kBlockM - 1) / kBlockM * kBlockM - seqlen_q) & params.row_offset_mask : 0;
    }
  }

  // m_blocks of this sequence (the scheduler's tiles of it per head).
  __forceinline__ __device__ int m_blocks() const { return (seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM; }

};

}  // namespace flashcore::cuda::sm90
