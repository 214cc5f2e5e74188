// Launch of forward_kvcache's kernels for one (dtype, head dim): the append (when there are new
// tokens), the split-KV decode kernel, and the combine (when split). The split count comes from
// the caller or from common/decode_splits.h's heuristic with this kernel's measured occupancy; the
// split workspace comes from the stream-ordered allocator and is freed on the stream.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/common/cuda_check.h"
#include "cuda/common/decode_splits.h"
#include "cuda/sm80/decode_append.h"
#include "cuda/sm80/decode_combine.h"
#include "cuda/sm80/decode_kernel.h"
#include "cuda/sm80/decode_launch.h"
#include "cuda/sm80/decode_traits.h"

namespace flashcore::cuda::sm80 {

template <class Traits>
Status launch_decode(const DecodeParams& params, cudaStream_t stream) {
  using Element = typename Traits::Element;
  auto kernel = &decode_kernel<Traits>;
  constexpr int kSmem = Traits::kSmemBytes;
  if constexpr (kSmem > 48 * 1024) {
    FLASHCORE_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  }
  const int rows = params.group_size * params.seqlen_q;
  const int m_blocks = (rows + Traits::kRows - 1) / Traits::kRows;
  const long long base_ctas = static_cast<long long>(params.batch) * params.heads_kv * m_blocks;
  const long long tiles = (std::max(params.max_seqlen_k, 1) + Traits::kBlockN - 1) / Traits::kBlockN;
  int num_splits = params.num_splits;
  if (num_splits == 0) {
    int per_sm = 1;
    FLASHCORE_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Traits::kThreads, kSmem));
    num_splits = choose_decode_splits(base_ctas, tiles, params.device.sm_count, per_sm);
  }
  num_splits = static_cast<int>(std::clamp<long long>(num_splits, 1, std::min<long long>(tiles, 65535)));

  DecodeParams p = params;
  p.num_splits = num_splits;
  void* workspace = nullptr;
  if (num_splits > 1) {
    const std::int64_t partial_rows = static_cast<std::int64_t>(num_splits) * p.batch * p.heads_q * p.seqlen_q;
    FLASHCORE_CUDA_RETURN_IF_ERROR(
        cudaMallocAsync(&workspace, static_cast<size_t>(partial_rows) * (p.head_dim + 1) * sizeof(float), stream));
    p.o_accum = static_cast<float*>(workspace);
    p.lse_accum = p.o_accum + partial_rows * p.head_dim;
  }
  Status status = Status::Ok();
  if (p.seqlen_new > 0) {
    decode_append_kernel<Element><<<dim3(p.seqlen_new, p.heads_kv, p.batch), 64, 0, stream>>>(p);
    status = cuda_status(cudaGetLastError(), "flashcore::forward_kvcache: launching the append kernel");
  }
  if (status.ok()) {
    kernel<<<dim3(num_splits, p.heads_kv * m_blocks, p.batch), Traits::kThreads, kSmem, stream>>>(p);
    status = cuda_status(cudaGetLastError(), "flashcore::forward_kvcache: launching the decode kernel");
  }
  if (status.ok() && num_splits > 1) {
    const std::int64_t query_rows = static_cast<std::int64_t>(p.batch) * p.heads_q * p.seqlen_q;
    decode_combine_kernel<Element><<<static_cast<unsigned>(query_rows), 128, 0, stream>>>(p, num_splits);
    status = cuda_status(cudaGetLastError(), "flashcore::forward_kvcache: launching the split combine kernel");
  }
  if (workspace != nullptr) {
    const Status freed = cuda_status(cudaFreeAsync(workspace, stream), "cudaFreeAsync(split workspace)");
    if (status.ok()) status = freed;
  }
  return status;
}

// Two row-block heights: 4 packed rows (GQA 4:1 decode, MHA speculative decoding of 4 tokens) keep
// the registers of q, the accumulators and the scores at ~100 a thread; 8 serve GQA 8:1 and
// longer packs (more rows run as more row blocks).
template <typename Element, int kHeadDim>
Status run_decode(const DecodeParams& params, cudaStream_t stream) {
  const int rows = params.group_size * params.seqlen_q;
  return rows <= 4 ? launch_decode<DecodeTraits<Element, kHeadDim, 4>>(params, stream)
                   : launch_decode<DecodeTraits<Element, kHeadDim, 8>>(params, stream);
}

}  // namespace flashcore::cuda::sm80
