// The sm80 forward kernel's epilogue: the normalised O of one query block from registers through
// shared memory (Q's tile, no longer needed) to global memory, and its LSE; or, for a query block
// that sees no key, the zeros and -inf FlashAttention defines.
#pragma once

#include <cmath>

#include <cute/tensor.hpp>

#include "cuda/common/epilogue.h"
#include "cuda/common/fragment.h"
#include "cuda/common/seqlen.h"
#include "cuda/params.h"

namespace flashcore::cuda::sm80 {

// A query block that sees no key at all (causal with seqlen_q > seqlen_k, or a sliding window that
// leaves its rows none): O = 0, LSE = -inf.
template <class Traits>
__device__ void write_empty_block(const FwdParams& params, const SeqlenInfo& seq, int m_block, int head, int batch) {
  using Element = typename Traits::Element;
  const int m0 = m_block * Traits::kBlockM;
  const int rows = min(Traits::kBlockM, seq.seqlen_q - m0);
  Element* o = static_cast<Element*>(params.out) + batch * params.o_strides.batch + seq.row_q * params.o_strides.row +
               head * params.o_strides.head;
  for (int i = threadIdx.x; i < rows * params.head_dim; i += Traits::kNThreads) {
    o[(m0 + i / params.head_dim) * params.o_strides.row + i % params.head_dim] = Element(0.0f);
  }
  if (params.lse != nullptr) {
    float* lse = params.lse + batch * params.lse_strides.batch + head * params.lse_strides.head + seq.row_q;
    for (int i = threadIdx.x; i < rows; i += Traits::kNThreads) lse[m0 + i] = -INFINITY;
  }
}

// acc_o: normalised fp32 O (kBlockM, kHeadDim) in tiled_mma's C partition; lse: its rows' LSE.
template <class Traits, int kRows, class AccO, class TiledMma, class SmemQ, class GmemO>
__forceinline__ __device__ void store_output(const FwdParams& params, const SeqlenInfo& seq, AccO const& acc_o,
                                             const float (&lse)[kRows],
                                             TiledMma const& tiled_mma, SmemQ const& sQ, GmemO& gO, int m0,
                                             int head, int batch, int tid) {
  using namespace cute;
  using Element = typename Traits::Element;
  const int rows_q = seq.seqlen_q - m0;
  Tensor rO = convert_fragment<Element>(acc_o);
  Tensor sO = make_tensor(sQ.data(), typename Traits::SmemLayoutQ{});  // (kBlockM, kHeadDim)
  __syncthreads();  // every warp is done reading Q from smem before O overwrites it
  fragment_to_smem(typename Traits::SmemCopyAtomStore{}, tiled_mma, rO, sO, tid);
  __syncthreads();
  smem_to_gmem<typename Traits::GmemTiledCopyStore>(sO, gO, rows_q, params.head_dim, tid);

  if (params.lse != nullptr) {
    float* lse_ptr = params.lse + batch * params.lse_strides.batch + head * params.lse_strides.head + seq.row_q + m0;
    write_row_values(tiled_mma, Shape<Int<Traits::kBlockM>, Int<Traits::kHeadDim>>{}, lse, lse_ptr, rows_q, tid);
  }
}

}  // namespace flashcore::cuda::sm80
