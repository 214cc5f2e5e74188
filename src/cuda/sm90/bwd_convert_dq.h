// The sm90 backward's last pass, for every arrangement: dQ = softmax_scale * (sum of the dq_accum
// slices, in slice order), rounded to the output dtype. The main kernel's consumer warps add dQ
// partials into each (query block) tile in per-warp runs (common/dq_accumulate.h) of the
// TiledMmadQ fragments; this pass gives each thread the fragment of its namesake consumer thread
// and recovers (query, d column) from the same partition. The fragment is (query, d) in the
// d <= 128 kernels and transposed, (d, query), in the d256 one (Traits::kDqTransposed).
//
// The scaled values go through a shared tile so that rows leave as 16-byte stores when dQ's
// address, strides and head_dim allow it (column pairs straight from the fragment, 4 bytes a
// thread, took 107-119 us against cuDNN's 74 at 16k tokens d128 on the H100: run 5 of
// docs/tuning/backward_sm90.md; the d256 kernel stored single elements until session 10);
// otherwise each value is stored from the fragment (pairs of neighbouring columns where the
// fragment has them).
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

#include "cuda/common/dq_accumulate.h"
#include "cuda/common/seqlen.h"
#include "cuda/params.h"

namespace flashcore::cuda::sm90 {

// Grid (ceil(seqlen_q / kBlockM), heads_q, batch), Traits::kConsumerThreads threads. Varlen: batch is
// the sequence, whose dq_accum rows are padded like a dense call's and whose dQ rows are its own
// rows of the packed dq; a CTA past the sequence's query blocks exits.
template <class Traits>
__global__ void __launch_bounds__(Traits::kConsumerThreads) bwd_convert_dq_kernel(const __grid_constant__ BwdParams params) {
  using namespace cute;
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kHeadDim = Traits::kHeadDim;
  constexpr int kFragElems = Traits::kDqFragElems;
  constexpr bool kTransposed = Traits::kDqTransposed;
  struct alignas(2 * sizeof(Element)) ElementPair {
    Element x, y;
  };

  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * kBlockM;
  const int head = blockIdx.y;
  const int batch = blockIdx.z;
  const SeqlenInfo seq(params, batch);
  if (m0 >= seq.seqlen_q) return;
  const int seqlen_q = seq.seqlen_q;

  typename Traits::TiledMmadQ mma_dq;
  auto thr_dq = mma_dq.get_thread_slice(tid);
  Tensor tdQcdQ = thr_dq.partition_C(make_identity_tensor(typename Traits::ShapedQ{}));  // (query, col) or (col, query)
  static_assert(decltype(size(tdQcdQ))::value == kFragElems);
  auto row_of = [&](int i) { return kTransposed ? int(get<1>(tdQcdQ(i))) : int(get<0>(tdQcdQ(i))); };
  auto col_of = [&](int i) { return kTransposed ? int(get<0>(tdQcdQ(i))) : int(get<1>(tdQcdQ(i))); };

  float acc[kFragElems];
  CUTE_UNROLL
  for (int i = 0; i < kFragElems; ++i) acc[i] = 0.0f;
  const float* tile = params.dq_accum +
                      ((static_cast<std::int64_t>(batch) * params.heads_q + head) * params.seqlen_q_rounded + m0) * kHeadDim;
  for (int split = 0; split < params.num_splits; ++split) {
    const float* slice_tile = tile + split * params.dq_accum_split_stride;
    CUTE_UNROLL
    for (int i = 0; i < kFragElems; i += kDqAccumVec) {
      const float4 v = *reinterpret_cast<const float4*>(slice_tile + dq_accum_offset<kFragElems>(tid / 32, tid % 32, i));
      acc[i] += v.x, acc[i + 1] += v.y, acc[i + 2] += v.z, acc[i + 3] += v.w;
    }
  }
  CUTE_UNROLL
  for (int i = 0; i < kFragElems; ++i) acc[i] *= params.softmax_scale;

  Element* dq = static_cast<Element*>(params.dq) + batch * params.dq_strides.batch + seq.row_q * params.dq_strides.row +
                head * params.dq_strides.head;
  constexpr int kVec = 16 / int(sizeof(Element));  // elements in a 16-byte store
  const bool rows_vectorisable = reinterpret_cast<std::uintptr_t>(dq) % 16 == 0 && params.dq_strides.row % kVec == 0 &&
                                 params.head_dim % kVec == 0;
  if (rows_vectorisable) {
    // (kBlockM, kHeadDim) tile, rows padded by one 16-byte vector against bank conflicts.
    constexpr int kRowElems = kHeadDim + kVec;
    __shared__ __align__(16) Element tile_dq[kBlockM * kRowElems];
    if constexpr (kTransposed) {  // fragment pairs are neighbouring queries: one element a store
      CUTE_UNROLL
      for (int i = 0; i < kFragElems; ++i) tile_dq[row_of(i) * kRowElems + col_of(i)] = Element(acc[i]);
    } else {  // fragment pairs are neighbouring columns: 4 bytes a store
      CUTE_UNROLL
      for (int i = 0; i < kFragElems; i += 2) {
        *reinterpret_cast<ElementPair*>(&tile_dq[row_of(i) * kRowElems + col_of(i)]) =
            ElementPair{Element(acc[i]), Element(acc[i + 1])};
      }
    }
    __syncthreads();
    constexpr int kVecsPerRow = kHeadDim / kVec;
    for (int v = tid; v < kBlockM * kVecsPerRow; v += Traits::kConsumerThreads) {
      const int r = v / kVecsPerRow, col = v % kVecsPerRow * kVec;
      if (m0 + r < seqlen_q && col < params.head_dim) {
        *reinterpret_cast<uint4*>(dq + (m0 + r) * params.dq_strides.row + col) =
            *reinterpret_cast<const uint4*>(&tile_dq[r * kRowElems + col]);
      }
    }
    return;
  }
  if constexpr (kTransposed) {
    CUTE_UNROLL
    for (int i = 0; i < kFragElems; ++i) {
      const int row = m0 + row_of(i), col = col_of(i);
      if (row < seqlen_q && col < params.head_dim) dq[row * params.dq_strides.row + col] = Element(acc[i]);
    }
  } else {
    CUTE_UNROLL
    for (int i = 0; i < kFragElems; i += 2) {
      const int row = m0 + row_of(i), col = col_of(i);
      if (row < seqlen_q && col < params.head_dim) {
        *reinterpret_cast<ElementPair*>(dq + row * params.dq_strides.row + col) = ElementPair{Element(acc[i]), Element(acc[i + 1])};
      }
    }
  }
}

}  // namespace flashcore::cuda::sm90
