// The lengths and first rows of one sequence of a call: every sequence seqlen_q x seqlen_k in the
// dense layout (rows reached through the batch stride), or, with cu_seqlens (attention.h,
// "varlen"), sequence b's own lengths and the first rows of its slices of the packed tensors
// (whose batch strides are then 0). Kernels read these instead of params.seqlen_q / seqlen_k,
// which are the grids' bounds (max_seqlen) in the packed layout.
#pragma once

#include <cstdint>

#include "cuda/params.h"

namespace flashcore::cuda {

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
      const int q0 = params.cu_seqlens_q[batch];
      const int k0 = params.cu_seqlens_k[batch];
      // Clamped to the grid's bounds: offsets on the GPU are not validated (attention.h).
      seqlen_q = max(0, min(params.cu_seqlens_q[batch + 1] - q0, params.seqlen_q));
      seqlen_k = max(0, min(params.cu_seqlens_k[batch + 1] - k0, params.seqlen_k));
      row_q = q0;
      row_k = k0;
    }
  }
};

}  // namespace flashcore::cuda
