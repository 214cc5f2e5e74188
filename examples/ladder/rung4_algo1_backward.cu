// Rung 4: the backward pass of Algorithm 1, recomputing the scores instead of storing them,
// float32.
//
// Idea: the forward saved only O and the log-sum-exp L of each query row, so P_ij is rebuilt
// exactly, tile by tile, as exp(scale * q_i . k_j - L_i): no N x N matrix is stored or read.
// With D_i = dO_i . O_i (the row term of the softmax gradient),
//   dV_j += sum_i P_ij dO_i,   dP_ij = dO_i . v_j,   dS_ij = P_ij (dP_ij - D_i),
//   dQ_i += scale sum_j dS_ij k_j,   dK_j += scale sum_i dS_ij q_i.
//
// Work split: one block per (query tile, head, batch), one thread per query row, looping over the
// key tiles (Br = Bc = 32). A block owns its query rows, so dQ stays in registers and is written
// once. Every query tile contributes to every key tile's dK and dV, so those are summed across
// blocks with atomicAdd into buffers zeroed first: simple, but the float additions land in a
// different order each run (not bit-reproducible), and FlashAttention-2 avoids them by looping
// the other way (a block per key tile) for dK and dV.
//
// Two roles per key tile, separated by a barrier: first each thread is a query row (it fills its
// row of the P and dS tiles and accumulates its dQ row); then each thread is a head-dim column
// (it sums a column of the dK and dV tiles), so the atomics of a warp hit consecutive addresses.
//
// Measured on H100 (ladder_timings, B=1 H=8 S=512 D=64): backward 1.03 ms full, 1.01 ms causal;
// flashcore's fp16 tensor-core path: 0.039 ms (0.041 ms causal).
#include <cute/tensor.hpp>

#include <cstdint>

#include "algo1_common.cuh"
#include "ladder_check.h"
#include "rungs.h"

namespace flashcore::ladder {
namespace {

constexpr const char* kRung = "algo1";

struct Algo1BackwardParams {
  const float* q;
  const float* k;
  const float* v;
  const float* o;
  const float* dout;
  const float* lse;
  float* dq;
  float* dk;  // zeroed before the launch: blocks add into it
  float* dv;  // same
  int heads;
  int seqlen;
  float scale;
  bool causal;
};

template <int kHeadDim>
struct Algo1BackwardTiles {
  static constexpr int kBlockM = 32;  // query rows per block, one thread each
  static constexpr int kBlockN = 32;  // keys per tile
  static constexpr int kThreads = kBlockM;
  // Read along rows by the row owner and down columns in the second role: padded so both are
  // conflict-free.
  using SmemLayoutRows = decltype(cute::make_layout(cute::make_shape(cute::Int<kBlockM>{}, cute::Int<kHeadDim>{}),
                                                    cute::make_stride(cute::Int<kHeadDim + 1>{}, cute::_1{})));
  // K and V: all threads read the same element at once (a broadcast), no padding needed.
  using SmemLayoutKV = decltype(cute::make_layout(cute::make_shape(cute::Int<kBlockN>{}, cute::Int<kHeadDim>{}),
                                                  cute::LayoutRight{}));
  using SmemLayoutP = decltype(cute::make_layout(cute::make_shape(cute::Int<kBlockM>{}, cute::Int<kBlockN>{}),
                                                 cute::make_stride(cute::Int<kBlockN + 1>{}, cute::_1{})));
};

template <int kHeadDim>
__global__ void __launch_bounds__(Algo1BackwardTiles<kHeadDim>::kThreads)
    algo1_backward_kernel(Algo1BackwardParams params) {
  using namespace cute;
  using Tiles = Algo1BackwardTiles<kHeadDim>;
  constexpr int kBlockM = Tiles::kBlockM;
  constexpr int kBlockN = Tiles::kBlockN;
  constexpr int kThreads = Tiles::kThreads;

  __shared__ float smem_q[cosize_v<typename Tiles::SmemLayoutRows>];
  __shared__ float smem_do[cosize_v<typename Tiles::SmemLayoutRows>];
  __shared__ float smem_k[cosize_v<typename Tiles::SmemLayoutKV>];
  __shared__ float smem_v[cosize_v<typename Tiles::SmemLayoutKV>];
  __shared__ float smem_p[cosize_v<typename Tiles::SmemLayoutP>];
  __shared__ float smem_ds[cosize_v<typename Tiles::SmemLayoutP>];
  Tensor sQ = make_tensor(make_smem_ptr(smem_q), typename Tiles::SmemLayoutRows{});   // (kBlockM, kHeadDim)
  Tensor sdO = make_tensor(make_smem_ptr(smem_do), typename Tiles::SmemLayoutRows{});  // (kBlockM, kHeadDim)
  Tensor sK = make_tensor(make_smem_ptr(smem_k), typename Tiles::SmemLayoutKV{});      // (kBlockN, kHeadDim)
  Tensor sV = make_tensor(make_smem_ptr(smem_v), typename Tiles::SmemLayoutKV{});      // (kBlockN, kHeadDim)
  Tensor sP = make_tensor(make_smem_ptr(smem_p), typename Tiles::SmemLayoutP{});       // (kBlockM, kBlockN)
  Tensor sdS = make_tensor(make_smem_ptr(smem_ds), typename Tiles::SmemLayoutP{});     // (kBlockM, kBlockN)

  const int tid = threadIdx.x;
  const int tile_i = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
  const int n = params.seqlen, heads = params.heads;
  const int row0 = tile_i * kBlockM;
  const int row = row0 + tid;
  const bool row_valid = row < n;
  auto q_tile = Shape<Int<kBlockM>, Int<kHeadDim>>{};
  auto kv_tile = Shape<Int<kBlockN>, Int<kHeadDim>>{};
  Tensor gQ = head_view<kHeadDim>(params.q, batch, head, heads, n);      // (seqlen, kHeadDim)
  Tensor gK = head_view<kHeadDim>(params.k, batch, head, heads, n);      // (seqlen, kHeadDim)
  Tensor gV = head_view<kHeadDim>(params.v, batch, head, heads, n);      // (seqlen, kHeadDim)
  Tensor gO = head_view<kHeadDim>(params.o, batch, head, heads, n);      // (seqlen, kHeadDim)
  Tensor gdO = head_view<kHeadDim>(params.dout, batch, head, heads, n);  // (seqlen, kHeadDim)
  Tensor gdQ = head_view<kHeadDim>(params.dq, batch, head, heads, n);    // (seqlen, kHeadDim)
  Tensor gdK = head_view<kHeadDim>(params.dk, batch, head, heads, n);    // (seqlen, kHeadDim)
  Tensor gdV = head_view<kHeadDim>(params.dv, batch, head, heads, n);    // (seqlen, kHeadDim)
  load_tile<kThreads>(sQ, local_tile(gQ, q_tile, make_coord(tile_i, 0)), n - row0);
  load_tile<kThreads>(sdO, local_tile(gdO, q_tile, make_coord(tile_i, 0)), n - row0);
  __syncthreads();

  // Per-row constants: the saved LSE and D_i = dO_i . O_i.
  float lse = 0.0f, row_dot = 0.0f;
  if (row_valid) {
    lse = params.lse[(static_cast<std::int64_t>(batch) * heads + head) * n + row];
    for (int d = 0; d < kHeadDim; ++d) row_dot += sdO(tid, d) * gO(row, d);
  }
  float dq[kHeadDim];
  CUTE_UNROLL
  for (int d = 0; d < kHeadDim; ++d) dq[d] = 0.0f;

  // Causal: key tiles past this query tile are hidden from all its rows (as Br == Bc).
  static_assert(kBlockM == kBlockN, "the causal tile bound and the tile loads assume square tiles");
  const int num_key_tiles = (n + kBlockN - 1) / kBlockN;
  const int key_tiles = params.causal ? min(tile_i + 1, num_key_tiles) : num_key_tiles;
  for (int j = 0; j < key_tiles; ++j) {
    const int key0 = j * kBlockN;
    __syncthreads();  // the previous tile's P, dS, K and V are no longer read
    load_tile<kThreads>(sK, local_tile(gK, kv_tile, make_coord(j, 0)), n - key0);
    load_tile<kThreads>(sV, local_tile(gV, kv_tile, make_coord(j, 0)), n - key0);
    __syncthreads();

    // Role 1, thread = query row: rebuild P_ij, form dS_ij, accumulate dQ_i. Rows past the end
    // and hidden keys get P = dS = 0, so they add nothing in role 2.
    for (int c = 0; c < kBlockN; ++c) {
      const int key = key0 + c;
      float p = 0.0f, ds = 0.0f;
      if (row_valid && key < n && (!params.causal || key <= row)) {
        float s = 0.0f, dp = 0.0f;
        CUTE_UNROLL
        for (int d = 0; d < kHeadDim; ++d) {
          s += sQ(tid, d) * sK(c, d);
          dp += sdO(tid, d) * sV(c, d);
        }
        p = expf(s * params.scale - lse);
        ds = p * (dp - row_dot);
        CUTE_UNROLL
        for (int d = 0; d < kHeadDim; ++d) dq[d] += ds * sK(c, d);
      }
      sP(tid, c) = p;
      sdS(tid, c) = ds;
    }
    __syncthreads();

    // Role 2, thread = head-dim column: this block's share of dV_j = P^T dO and dK_j = scale dS^T Q.
    const int keys = min(kBlockN, n - key0);
    for (int c = 0; c < keys; ++c) {
      for (int d = tid; d < kHeadDim; d += kThreads) {
        float dv = 0.0f, dk = 0.0f;
        for (int r = 0; r < kBlockM; ++r) {
          dv += sP(r, c) * sdO(r, d);
          dk += sdS(r, c) * sQ(r, d);
        }
        atomicAdd(&gdV(key0 + c, d), dv);
        atomicAdd(&gdK(key0 + c, d), dk * params.scale);
      }
    }
  }

  if (row_valid) {
    CUTE_UNROLL
    for (int d = 0; d < kHeadDim; ++d) gdQ(row, d) = dq[d] * params.scale;
  }
}

}  // namespace

Status algo1_backward(const LadderProblem& p, const void* q, const void* k, const void* v, const void* o,
                      const void* dout, const float* lse, void* dq, void* dk, void* dv, cudaStream_t stream) {
  LADDER_RETURN_IF_ERROR(check_problem(p, kAlgo1HeadDims, kRung));
  LADDER_RETURN_IF_ERROR(check_pointers({{q, "q"}, {k, "k"}, {v, "v"}, {o, "o"}, {dout, "dout"}, {lse, "lse"},
                                         {dq, "dq"}, {dk, "dk"}, {dv, "dv"}},
                                        kRung));
  const std::size_t bytes = static_cast<std::size_t>(p.batch) * p.seqlen * p.heads * p.head_dim * sizeof(float);
  LADDER_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dk, 0, bytes, stream));
  LADDER_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dv, 0, bytes, stream));
  const Algo1BackwardParams params{static_cast<const float*>(q), static_cast<const float*>(k),
                                   static_cast<const float*>(v), static_cast<const float*>(o),
                                   static_cast<const float*>(dout), lse, static_cast<float*>(dq),
                                   static_cast<float*>(dk), static_cast<float*>(dv), p.heads, p.seqlen,
                                   p.softmax_scale, p.causal};
  constexpr int kBlockM = Algo1BackwardTiles<64>::kBlockM;  // the same for every head dim
  const dim3 grid((p.seqlen + kBlockM - 1) / kBlockM, p.heads, p.batch);
  if (p.head_dim == 32) {
    algo1_backward_kernel<32><<<grid, Algo1BackwardTiles<32>::kThreads, 0, stream>>>(params);
  } else {
    algo1_backward_kernel<64><<<grid, Algo1BackwardTiles<64>::kThreads, 0, stream>>>(params);
  }
  return launch_status("algo1_backward_kernel");
}

}  // namespace flashcore::ladder
