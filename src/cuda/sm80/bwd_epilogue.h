// The sm80 backward kernel's epilogue: one key block's dK (times the softmax scale) and dV, from
// registers through the K and V tiles' shared memory to global memory, rows past seqlen_k skipped.
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

#include "cuda/common/epilogue.h"
#include "cuda/common/fragment.h"
#include "cuda/common/seqlen.h"
#include "cuda/params.h"

namespace flashcore::cuda::sm80 {

// Every warp must be done reading sK and sV (the caller synchronises before).
template <class Traits, class AccDK, class AccDV, class TiledMma, class SmemK, class SmemV>
__forceinline__ __device__ void store_dk_dv(const BwdParams& params, const SeqlenInfo& seq, AccDK& acc_dk,
                                            AccDV const& acc_dv,
                                            TiledMma const& tiled_mma_dkv, SmemK& sK, SmemV& sV, int batch,
                                            int kv_head, int n0, int tid) {
  using namespace cute;
  using Element = typename Traits::Element;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr int kHeadDim = Traits::kHeadDim;
  CUTE_UNROLL
  for (int i = 0; i < size(acc_dk); ++i) acc_dk(i) *= params.softmax_scale;
  Tensor rdK = convert_fragment<Element>(acc_dk);
  Tensor rdV = convert_fragment<Element>(acc_dv);
  fragment_to_smem(typename Traits::SmemCopyAtomStore{}, tiled_mma_dkv, rdK, sK, tid);
  fragment_to_smem(typename Traits::SmemCopyAtomStore{}, tiled_mma_dkv, rdV, sV, tid);
  __syncthreads();

  const std::int64_t dk_offset =
      batch * params.dk_strides.batch + kv_head * params.dk_strides.head + (seq.row_k + n0) * params.dk_strides.row;
  const std::int64_t dv_offset =
      batch * params.dv_strides.batch + kv_head * params.dv_strides.head + (seq.row_k + n0) * params.dv_strides.row;
  Tensor gdK = make_tensor(make_gmem_ptr(static_cast<Element*>(params.dk) + dk_offset),
                           Shape<Int<kBlockN>, Int<kHeadDim>>{}, make_stride(params.dk_strides.row, _1{}));
  Tensor gdV = make_tensor(make_gmem_ptr(static_cast<Element*>(params.dv) + dv_offset),
                           Shape<Int<kBlockN>, Int<kHeadDim>>{}, make_stride(params.dv_strides.row, _1{}));
  const int rows_k = seq.seqlen_k - n0;
  smem_to_gmem<typename Traits::GmemTiledCopyStore>(sK, gdK, rows_k, params.head_dim, tid);
  smem_to_gmem<typename Traits::GmemTiledCopyStore>(sV, gdV, rows_k, params.head_dim, tid);
}

}  // namespace flashcore::cuda::sm80
