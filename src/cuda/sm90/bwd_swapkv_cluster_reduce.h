// dKᵀ and dVᵀ of one key block summed over the CTAs of a cluster that split its kv head's group of
// query heads: bwd_cluster_reduce.h's scheme (the reasons, the two passes through one fp32 buffer
// over the free Q/dO tiles, rank-order sums) for the transposed fragments of bwd_swapkv_*.h, whose
// neighbouring accumulator values are neighbouring keys of one column, so the stores are single
// elements. Its cluster helpers (kv_reduce_cluster_sync, map_smem_to_rank, load_cluster_smem,
// kKvReduceClusterSyncs) are shared.
//
// Enabled in run_bwd_swapkv since device run 8 (session 9): causal GQA 8:1 at d256 0.53-0.59x ->
// 0.84-0.91x cuDNN on the H100 (docs/tuning/backward_sm90.md).
#pragma once

#include <cstdint>

#include <cute/arch/cluster_sm90.hpp>
#include <cute/tensor.hpp>

#include "cuda/sm90/bwd_cluster_reduce.h"
#include "cuda/sm90/bwd_mainloop.h"
#include "cuda/sm90/bwd_named_barrier.h"

namespace flashcore::cuda::sm90 {

template <class Traits>
struct BwdSwapKvClusterReduce {
  using Element = typename Traits::Element;
  using Params = typename Traits::Params;

  __forceinline__ __device__ static void join() { BwdClusterReduce<Traits>::join(); }

  template <class Frag>
  __forceinline__ __device__ static void sum_and_store(Params const& params, typename Traits::SharedStorage& shared,
                                                       BwdBlock const& blk, int thread_idx, Frag const& tdVrdV,
                                                       Frag const& tdKrdK) {
    constexpr int kElems = decltype(cute::size(tdVrdV))::value;
    static_assert(sizeof(shared.q) + sizeof(shared.d_o) >= sizeof(float) * kElems * Traits::kConsumerThreads,
                  "the dK/dV partials do not fit over the Q and dO tiles");
    // Q and dO are consecutive 1024-byte-aligned arrays of 1024-byte multiples: one region.
    float* buffer = reinterpret_cast<float*>(shared.q.data());
    named_barrier_sync(Traits::kConsumerThreads, BwdNamedBarrier::kKvReduce);  // both warpgroups' products retired
    Element* dv = static_cast<Element*>(params.dv) + blk.batch * params.dv_batch_stride +
                  blk.kv_head * params.dv_head_stride;
    Element* dk = static_cast<Element*>(params.dk) + blk.batch * params.dk_batch_stride +
                  blk.kv_head * params.dk_head_stride;
    pass(params, blk, buffer, thread_idx, tdVrdV, dv, params.dv_row_stride, 1.f);
    pass(params, blk, buffer, thread_idx, tdKrdK, dk, params.dk_row_stride, params.softmax_scale);
  }

 private:
  template <class Frag>
  __forceinline__ __device__ static void pass(Params const& params, BwdBlock const& blk, float* buffer,
                                              int thread_idx, Frag const& frag, Element* out, int64_t row_stride,
                                              float scale) {
    using namespace cute;
    constexpr int kElems = decltype(size(frag))::value;
    CUTE_UNROLL
    for (int i = 0; i < kElems; ++i) buffer[i * Traits::kConsumerThreads + thread_idx] = frag(i);
    kv_reduce_cluster_sync();  // every CTA's partial is written

    const int splits = params.kv_splits;
    const int rank = int(block_rank_in_cluster());
    const int chunk = kElems / splits;
    const uint32_t local = static_cast<uint32_t>(__cvta_generic_to_shared(buffer + thread_idx));
    typename Traits::TiledMmadKV mma_dkv;
    Tensor tdKVcdKV = mma_dkv.get_thread_slice(thread_idx).partition_C(
        make_identity_tensor(typename Traits::ShapedKV{}));  // (col, key)
    const int n0 = blk.n_block * Traits::kBlockN;
    for (int i = rank * chunk; i < (rank + 1) * chunk; ++i) {
      const int col = get<0>(tdKVcdKV(i));
      const int row = n0 + get<1>(tdKVcdKV(i));
      float x = 0.f;
      for (int s = 0; s < splits; ++s) {  // rank order: the same sum run after run
        x += load_cluster_smem(map_smem_to_rank(local + uint32_t(i * Traits::kConsumerThreads * sizeof(float)), s));
      }
      if (row < params.seqlen_k && col < params.head_dim) out[row * row_stride + col] = Element(x * scale);
    }
    kv_reduce_cluster_sync();  // every CTA has read every partial
  }
};

}  // namespace flashcore::cuda::sm90
