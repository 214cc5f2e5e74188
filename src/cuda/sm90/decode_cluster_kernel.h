// sm90's split-KV decode kernel: the sm80 tensor-core kernel's scheduler and mainloop
// (sm80/decode_mma_kernel.h: mma.sync on cp.async-staged tiles, GQA-packed rows) with 8 warps a CTA,
// and a sequence's split CTAs launched as one thread-block cluster that merges their partials in
// distributed shared memory (decode_cluster_merge.h). No split workspace, no arrival counter, no
// merge after the slowest split of the whole grid: each cluster finishes on its own.
//
// Grid: (num_splits, heads_kv x row blocks, batch), clusters of (num_splits, 1, 1): the cluster's
// rank is the split. One CTA a SM (8 warps x 3 stages: 200 KB at d128): the same warps and bytes in
// flight a SM as the sm80 kernel's two 4-warp CTAs, with half the CTAs to merge, so that 16 splits
// (the largest cluster) fill the 132 SMs at batch 1 (GQA 32:8: 8 kv heads x 16 = 128 CTAs).
#pragma once

#include <cuda_runtime.h>

#include "cuda/params.h"
#include "cuda/sm80/decode_append.h"
#include "cuda/sm80/decode_mma_kernel.h"
#include "cuda/sm90/decode_cluster_merge.h"

namespace flashcore::cuda::sm90 {

// The cluster kernel's CTA: sm80's tensor-core decode CTA (`Base`, a sm80::DecodeMmaTraits) with
// this family's shared memory layout. After the mainloop the pipeline's bytes hold the warps'
// partials (kMergeBytes, decode_epilogue.h's layout) and then the CTA's merged partial that the
// cluster's other CTAs read: kRows x kHeadDim outputs and kRows LSEs, fp32.
template <class Base>
struct ClusterDecodeTraits : Base {
  static constexpr int kClusterPartialOffset = Base::kMergeBytes;
  static constexpr int kClusterPartialBytes = Base::kRows * (Base::kHeadDim + 1) * 4;
  static constexpr int kSmemBytes =
      Base::kPipelineBytes > kClusterPartialOffset + kClusterPartialBytes ? Base::kPipelineBytes
                                                                          : kClusterPartialOffset + kClusterPartialBytes;
  static_assert(kClusterPartialOffset % 16 == 0, "the partial outputs are stored as float4");
};

// CTAs a SM the shared memory allows (228 KB a SM on sm90, 1 KB of it reserved a CTA), asked of ptxas
// so the registers do not lower it: 8 warps at 3 stages (200 KB, the default) 1; dev/sm90_decode's A/B CTAs (v10):
// 12 warps at 2 stages (196 KB) 1, 4 warps at 3 stages and 6 at 2 (100 KB) 2 (<= 170 registers for
// 384 threads).
template <class Traits>
constexpr int cluster_decode_ctas_per_sm() {
  constexpr int kSmemPerSm = 228 * 1024;
  constexpr int kFit = kSmemPerSm / (Traits::kSmemBytes + 1024);
  return kFit < 1 ? 1 : kFit > 3 ? 3 : kFit;
}

template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads, cluster_decode_ctas_per_sm<Traits>())
    decode_cluster_kernel(const __grid_constant__ DecodeParams p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const sm80::DecodeCta cta = sm80::decode_cta<Traits::kRows>(p);
  sm80::decode_mma_mainloop<Traits>(p, cta, smem_raw);
  const float* merge_o = reinterpret_cast<const float*>(smem_raw);  // (kWarps, kRows, kHeadDim)
  const float* merge_ml = merge_o + Traits::kWarps * Traits::kRows * Traits::kHeadDim;  // (kWarps, kRows, 2)
  float* cluster_partial = reinterpret_cast<float*>(smem_raw + Traits::kClusterPartialOffset);
  decode_cluster_epilogue<typename Traits::Element, Traits::kHeadDim, Traits::kRows, Traits::kWarps, Traits::kThreads>(
      p, merge_o, merge_ml, cluster_partial, cta.b, cta.hk, cta.row0, cta.num_splits);
}

// The append (new tokens into the cache, rotated), this family's own instance of sm80's body.
template <typename Element>
__global__ void decode_append_kernel(const __grid_constant__ DecodeParams p) {
  sm80::append_new_tokens<Element>(p);
}

}  // namespace flashcore::cuda::sm90
