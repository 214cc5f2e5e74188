// dK and dV of one key block summed over the CTAs of a cluster that split its kv head's group of
// query heads (grouped-query attention; default and deterministic mode).
//
// Why: with GQA the grid is (n_blocks, heads_kv, batch) and each CTA sweeps every query head of
// its group, so at 8:1 a few hundred CTAs each run 8 long sweeps (causal: block 0 sweeps them
// all), and wave quantisation and the causal tail decide the time (0.71-0.78x cuDNN on the H100,
// docs/tuning/backward_sm90.md). With kv_splits = S, S CTAs of one cluster (cluster shape
// (1, S, 1), grid.y = heads_kv * S) take group/S query heads each, and their dK/dV partials meet
// through distributed shared memory: no workspace, no atomics, and the sum is taken in cluster
// rank order, so the result is the same run after run.
//
// Two passes (dV, then dK) through one fp32 buffer over the Q/dO/dS tiles, which are free once
// the sweep is over: each CTA writes its partial fragment (thread-major: element i of consumer
// thread t at i * kConsumerThreads + t, conflict-free), the cluster meets, then CTA rank r sums
// elements [r n/S, (r+1) n/S) of every consumer thread's fragment over the S CTAs (the same
// thread index in every CTA holds the same (key, column) positions) and stores them to global
// memory. The producer warpgroup joins the cluster barriers only.
#pragma once

#include <cstdint>

#include <cute/arch/cluster_sm90.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "cuda/sm90/bwd_mainloop.h"
#include "cuda/sm90/bwd_named_barrier.h"

namespace flashcore::cuda::sm90 {

// Cluster barriers per reduction (both roles must pass the same number): per pass, one after the
// partials are written and one before the buffer is rewritten or the CTA exits.
inline constexpr int kKvReduceClusterSyncs = 4;

__forceinline__ __device__ void kv_reduce_cluster_sync() {
  __syncwarp();  // barrier.cluster.*.aligned: the whole warp executes it together
  cute::cluster_sync();
}

__forceinline__ __device__ uint32_t map_smem_to_rank(uint32_t smem_addr, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_addr), "r"(rank));
  return remote;
}

__forceinline__ __device__ float load_cluster_smem(uint32_t addr) {
  float value;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(value) : "r"(addr) : "memory");
  return value;
}

template <class Traits>
struct BwdClusterReduce {
  static constexpr int kMaxSplits = 4;
  using Element = typename Traits::Element;
  using Params = typename Traits::Params;

  // The producer warpgroup's part.
  __forceinline__ __device__ static void join() {
    CUTE_UNROLL
    for (int s = 0; s < kKvReduceClusterSyncs; ++s) kv_reduce_cluster_sync();
  }

  // A consumer thread's part: sums its share of dV and dK over the cluster and stores it (the
  // epilogue's rules: dK times softmax_scale, rows past seqlen_k and columns past head_dim left).
  // The sum runs as a loop over runtime element indices and writes nothing back into the
  // fragments: with the fragments indexed at compile time under a runtime predicate, ptxas spilled
  // 128 B in the causal d128 kernel.
  template <class Frag>
  __forceinline__ __device__ static void sum_and_store(Params const& params, typename Traits::SharedStorage& shared,
                                                       BwdBlock const& blk, int thread_idx, Frag const& tdVrdV,
                                                       Frag const& tdKrdK) {
    constexpr int kElems = decltype(cute::size(tdVrdV))::value;
    static_assert(sizeof(shared.q) + sizeof(shared.d_o) + sizeof(shared.ds) >=
                      sizeof(float) * kElems * Traits::kConsumerThreads,
                  "the dK/dV partials do not fit over the Q, dO and dS tiles");
    // Q, dO and dS are consecutive 1024-byte-aligned arrays of 1024-byte multiples: one region.
    float* buffer = reinterpret_cast<float*>(shared.q.data());
    // Both warpgroups' last products (which read Q, dO and dS) have retired.
    named_barrier_sync(Traits::kConsumerThreads, BwdNamedBarrier::kKvReduce);
    const BwdSequence seq(params, blk.batch);  // varlen: the sequence's rows of the packed dK, dV
    Element* dv = static_cast<Element*>(params.dv) + blk.batch * params.dv_batch_stride +
                  seq.row_k * params.dv_row_stride + blk.kv_head * params.dv_head_stride;
    Element* dk = static_cast<Element*>(params.dk) + blk.batch * params.dk_batch_stride +
                  seq.row_k * params.dk_row_stride + blk.kv_head * params.dk_head_stride;
    pass(params, blk, buffer, thread_idx, tdVrdV, dv, params.dv_row_stride, 1.f);
    pass(params, blk, buffer, thread_idx, tdKrdK, dk, params.dk_row_stride, params.softmax_scale);
  }

 private:
  struct alignas(2 * sizeof(Element)) ElementPair {
    Element x, y;
  };

  template <class Frag>
  __forceinline__ __device__ static void pass(Params const& params, BwdBlock const& blk, float* buffer,
                                              int thread_idx, Frag const& frag, Element* out, int64_t row_stride,
                                              float scale) {
    using namespace cute;
    constexpr int kElems = decltype(size(frag))::value;
    CUTE_UNROLL
    for (int i = 0; i < kElems; ++i) buffer[i * Traits::kConsumerThreads + thread_idx] = frag(i);
    // The looping kernel's next key block loads Q and dO into these bytes by TMA (async proxy).
    cutlass::arch::fence_view_async_shared();
    kv_reduce_cluster_sync();  // every CTA's partial is written (release/acquire across the cluster)

    const int splits = params.kv_splits;
    const int rank = int(block_rank_in_cluster());
    const int chunk = kElems / splits;  // even (kElems is a multiple of 8, splits 2 or 4): pairs stay together
    const uint32_t local = static_cast<uint32_t>(__cvta_generic_to_shared(buffer + thread_idx));
    typename Traits::TiledMmadKV mma_dkv;
    Tensor tdKVcdKV = mma_dkv.get_thread_slice(thread_idx).partition_C(
        make_identity_tensor(typename Traits::ShapedKV{}));  // (key, col)
    const int n0 = blk.n_block * Traits::kBlockN;
    for (int i = rank * chunk; i < (rank + 1) * chunk; i += 2) {
      const int row = n0 + get<0>(tdKVcdKV(i));
      const int col = get<1>(tdKVcdKV(i));
      float x = 0.f, y = 0.f;
      for (int s = 0; s < splits; ++s) {  // rank order: the same sum run after run
        const uint32_t addr = map_smem_to_rank(local + uint32_t(i * Traits::kConsumerThreads * sizeof(float)), s);
        x += load_cluster_smem(addr);
        y += load_cluster_smem(addr + Traits::kConsumerThreads * sizeof(float));
      }
      if (row < blk.seqlen_k && col < params.head_dim) {
        *reinterpret_cast<ElementPair*>(out + row * row_stride + col) = ElementPair{Element(x * scale), Element(y * scale)};
      }
    }
    kv_reduce_cluster_sync();  // every CTA has read every partial
  }
};

}  // namespace flashcore::cuda::sm90
