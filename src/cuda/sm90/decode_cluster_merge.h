// The epilogue of sm90's cluster decode kernel: a sequence's split CTAs form one thread-block
// cluster (up to 16 CTAs, non-portable above 8), and their partial results merge through
// distributed shared memory instead of the split workspace in global memory.
//
// Why (docs/kvcache.md, v9): the sm80 kernel's global merge is a serial chain after the slowest
// split of all (partial stores -> arrival count -> the last CTA's L2 loads -> stores), ~2.5-4 us of
// a ~20 us batch-1 step. Here each CTA leaves its merged partial (kRows x head_dim outputs,
// normalised within the split, and kRows LSEs, fp32) in its own shared memory; after one cluster
// barrier every CTA of the cluster merges a share of the (row, 4 columns) outputs, reading the
// splits' partials from their shared memories (DSMEM: an SM-to-SM round trip, not L2); a second
// barrier keeps each CTA's shared memory alive until the others have read it.
//   lse = log(sum_s exp(lse_s)),  out = sum_s exp(lse_s - lse) out_s   (decode_combine.h's rule and helpers)
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/params.h"
#include "cuda/sm80/decode_combine.h"
#include "cuda/sm80/decode_epilogue.h"

namespace flashcore::cuda::sm90 {

inline constexpr int kMaxClusterSplits = 16;  // the largest (non-portable) cluster on sm90

// merge_o (kGroups, kRows, kHeadDim) / merge_ml (kGroups, kRows, 2): the warps' partials, as
// decode_epilogue.h reads them (the caller synchronised the CTA). cluster_partial: this CTA's
// (kRows, kHeadDim) outputs then kRows LSEs, in shared memory the other CTAs read.
// Every thread of every CTA of the cluster calls this (the cluster barriers are aligned).
template <typename Element, int kHeadDim, int kRows, int kGroups, int kThreads>
__device__ __forceinline__ void decode_cluster_epilogue(const DecodeParams& p, const float* merge_o,
                                                        const float* merge_ml, float* cluster_partial, int b,
                                                        int hk, int row0, int num_splits) {
  namespace cg = cooperative_groups;
  constexpr int kLanes = kHeadDim / 8;
  const int rows_total = p.group_size * p.seqlen_q;
  const int rows = min(kRows, rows_total - row0);
  float* part_o = cluster_partial;                    // (kRows, kHeadDim)
  float* part_lse = cluster_partial + kRows * kHeadDim;  // (kRows)

  // ---- this CTA's result over its keys: the warps' partials merged (sm80/decode_epilogue.h) ----
  for (int task = threadIdx.x; task < kRows * kLanes; task += kThreads) {
    const int m = task / kLanes;
    const int c = (task % kLanes) * 8;
    if (m >= rows || c >= p.head_dim) continue;
    float o[8];
    const float lse = sm80::merge_group_partials<kHeadDim, kRows, kGroups>(merge_o, merge_ml, m, c, o);
    if (num_splits == 1) {
      const int r = row0 + m;
      sm80::store_decode_output<Element>(p, o, lse, b, hk * p.group_size + r / p.seqlen_q, r % p.seqlen_q, c);
    } else {
      float4* dst = reinterpret_cast<float4*>(part_o + m * kHeadDim + c);
      dst[0] = make_float4(o[0], o[1], o[2], o[3]);
      dst[1] = make_float4(o[4], o[5], o[6], o[7]);
      if (c == 0) part_lse[m] = lse;
    }
  }
  if (num_splits == 1) return;  // a cluster of one CTA (the grid's x is the cluster's size)

  // ---- the cluster's merge: CTA `rank` takes tasks rank, rank + S, ... of (row, 4 columns) ----
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // release / acquire: every CTA's partial is written and visible to the cluster
  const int rank = static_cast<int>(cluster.block_rank());
  const int quads = p.head_dim / 4;  // head_dim % 8 == 0
  for (int task = threadIdx.x * num_splits + rank; task < rows * quads; task += kThreads * num_splits) {
    const int m = task / quads;
    const int c = (task % quads) * 4;
    // The LSEs and the partials do not depend on each other: all 2S loads go out together.
    float lse_s[kMaxClusterSplits];
    float4 x[kMaxClusterSplits];
#pragma unroll
    for (int s = 0; s < kMaxClusterSplits; ++s) {
      if (s < num_splits) {
        lse_s[s] = *cluster.map_shared_rank(part_lse + m, s);
        x[s] = *cluster.map_shared_rank(reinterpret_cast<const float4*>(part_o + m * kHeadDim + c), s);
      }
    }
    float max_lse = -INFINITY;
#pragma unroll
    for (int s = 0; s < kMaxClusterSplits; ++s)
      if (s < num_splits) max_lse = fmaxf(max_lse, lse_s[s]);
    float sum = 0.0f;
#pragma unroll
    for (int s = 0; s < kMaxClusterSplits; ++s)
      if (s < num_splits) sum += sm80::split_weight(lse_s[s], max_lse);
    const float lse = sm80::combined_lse(max_lse, sum);
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int s = 0; s < kMaxClusterSplits; ++s) {
      if (s < num_splits) {
        const float wt = sm80::split_weight(lse_s[s], lse);
        o.x += wt * x[s].x;
        o.y += wt * x[s].y;
        o.z += wt * x[s].z;
        o.w += wt * x[s].w;
      }
    }
    const int r = row0 + m;
    const int h = hk * p.group_size + r / p.seqlen_q;
    const int i = r % p.seqlen_q;
    Element* out = static_cast<Element*>(p.out) + b * p.o_strides.batch + i * p.o_strides.row + h * p.o_strides.head + c;
    out[0] = static_cast<Element>(o.x);
    out[1] = static_cast<Element>(o.y);
    out[2] = static_cast<Element>(o.z);
    out[3] = static_cast<Element>(o.w);
    if (c == 0 && p.lse != nullptr) p.lse[b * p.lse_strides.batch + h * p.lse_strides.head + i] = lse;
  }
  cluster.sync();  // no CTA leaves (freeing its shared memory) while another still reads it
}

}  // namespace flashcore::cuda::sm90
