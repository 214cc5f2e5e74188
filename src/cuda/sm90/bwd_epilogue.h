// The backward epilogue: dK (scaled by softmax_scale here, once) and dV from fp32 registers to
// 16-bit, straight to global memory, each thread storing its column pairs (4 bytes) of its key
// rows; rows past seqlen_k and columns past the real head_dim are left unwritten (varlen: the
// sequence's own rows of the packed dK and dV, bwd_sequence.h).
//
// First version: no smem staging or TMA store. dK and dV are written once per CTA against a whole
// query sweep of loads, so this costs little except at short seqlen_q (next step in
// docs/tuning/backward_sm90.md).
#pragma once

#include <cute/tensor.hpp>

#include "cuda/sm90/bwd_mainloop.h"

namespace flashcore::cuda::sm90 {

template <class Traits>
struct BwdEpilogue {
  using Element = typename Traits::Element;
  using Params = typename Traits::Params;

  struct alignas(2 * sizeof(Element)) ElementPair {
    Element x, y;
  };

  template <class FragKV>
  __forceinline__ __device__ static void store(Params const& params, BwdBlock const& blk, int thread_idx,
                                               FragKV const& tdVrdV, FragKV const& tdKrdK) {
    using namespace cute;
    typename Traits::TiledMmadKV mma_dkv;
    auto thr_dkv = mma_dkv.get_thread_slice(thread_idx);
    Tensor tdKVcdKV = thr_dkv.partition_C(make_identity_tensor(typename Traits::ShapedKV{}));  // (key, col)
    const int n0 = blk.n_block * Traits::kBlockN;
    const BwdSequence seq(params, blk.batch);  // read anew: not held through the mainloop
    Element* dk = static_cast<Element*>(params.dk) + blk.batch * params.dk_batch_stride +
                  seq.row_k * params.dk_row_stride + blk.kv_head * params.dk_head_stride;
    Element* dv = static_cast<Element*>(params.dv) + blk.batch * params.dv_batch_stride +
                  seq.row_k * params.dv_row_stride + blk.kv_head * params.dv_head_stride;
    // Accumulator values 2j and 2j+1 are neighbouring columns of one row (fragment.h).
    CUTE_UNROLL
    for (int i = 0; i < size(tdVrdV); i += 2) {
      const int row = n0 + get<0>(tdKVcdKV(i));
      const int col = get<1>(tdKVcdKV(i));
      if (row < seq.seqlen_k && col < params.head_dim) {
        ElementPair k_pair{Element(tdKrdK(i) * params.softmax_scale), Element(tdKrdK(i + 1) * params.softmax_scale)};
        ElementPair v_pair{Element(tdVrdV(i)), Element(tdVrdV(i + 1))};
        // head_dim is even (the caller pads odd ones), so a pair never straddles it.
        *reinterpret_cast<ElementPair*>(dk + row * params.dk_row_stride + col) = k_pair;
        *reinterpret_cast<ElementPair*>(dv + row * params.dv_row_stride + col) = v_pair;
      }
    }
  }
};

}  // namespace flashcore::cuda::sm90
