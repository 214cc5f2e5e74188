// The transposed-arrangement backward's epilogue: dKᵀ (scaled by softmax_scale here, once) and dVᵀ
// from fp32 registers to 16-bit global memory. A thread's accumulator pairs are neighbouring keys
// of one d column (the transposed products), so it stores single elements; rows past seqlen_k
// and columns past the real head_dim are left unwritten.
//
// First version: element stores, no smem transpose (dK and dV are written once per CTA against a
// whole query sweep; docs/tuning/backward_sm90.md).
#pragma once

#include <cute/tensor.hpp>

#include "cuda/sm90/bwd_mainloop.h"

namespace flashcore::cuda::sm90 {

template <class Traits>
struct BwdSwapKvEpilogue {
  using Element = typename Traits::Element;
  using Params = typename Traits::Params;

  template <class FragKV>
  __forceinline__ __device__ static void store(Params const& params, BwdBlock const& blk, int thread_idx,
                                               FragKV const& tdVrdV, FragKV const& tdKrdK) {
    using namespace cute;
    typename Traits::TiledMmadKV mma_dkv;
    auto thr_dkv = mma_dkv.get_thread_slice(thread_idx);
    Tensor tdKVcdKV = thr_dkv.partition_C(make_identity_tensor(typename Traits::ShapedKV{}));  // (col, key)
    const int n0 = blk.n_block * Traits::kBlockN;
    Element* dk = static_cast<Element*>(params.dk) + blk.batch * params.dk_batch_stride +
                  blk.kv_head * params.dk_head_stride;
    Element* dv = static_cast<Element*>(params.dv) + blk.batch * params.dv_batch_stride +
                  blk.kv_head * params.dv_head_stride;
    CUTE_UNROLL
    for (int i = 0; i < size(tdVrdV); ++i) {
      const int col = get<0>(tdKVcdKV(i));
      const int row = n0 + get<1>(tdKVcdKV(i));
      if (row < params.seqlen_k && col < params.head_dim) {
        dk[row * params.dk_row_stride + col] = Element(tdKrdK(i) * params.softmax_scale);
        dv[row * params.dv_row_stride + col] = Element(tdVrdV(i));
      }
    }
  }
};

}  // namespace flashcore::cuda::sm90
