// Rung 3: FlashAttention's Algorithm 1 (Dao et al., 2022), one thread per query row, with the
// shared-memory tiles described as CuTe layouts, float32.
//
// Idea: never form the N x N scores. One block per (head, batch) walks the key/value tiles K_j,
// V_j (outer loop, Algorithm 1's line 5) and, for each, every query tile Q_i (inner loop, line 7):
// it computes the Br x Bc score tile S_ij in shared memory, its row max m~ and row sum l~, and
// folds them into the running statistics m_i, l_i and output O_i, which Algorithm 1 keeps in
// global memory (HBM) between visits:
//   m_new = max(m, m~),  l_new = e^(m - m_new) l + e^(m~ - m_new) l~,
//   O     = (e^(m - m_new) l O + e^(m~ - m_new) P~_ij V_j) / l_new.
// Memory is O(N) beyond the inputs (m and l), whatever N is; the price is that O_i, m_i and l_i
// make a round trip through global memory for every (i, j) pair, and a (head, batch) grid of
// single-warp blocks leaves most of the GPU idle. FlashAttention-2 swaps the loops for that reason.
//
// CuTe: each tile is a tensor over shared memory with a static layout, e.g. Q's is
// (Int<32>, Int<kHeadDim>) : (Int<kHeadDim + 1>, _1). Row-major plus one padding column: thread r
// walks row r, and the odd row stride puts the 32 threads' elements in 32 different banks. K and V
// are read by all threads at the same coordinate (a broadcast), so theirs need no padding. Global
// tensors are views of one (batch, head) with a dynamic row stride, tiled by local_tile.
//
// Causal: query i sees key j iff j <= i (seqlen_q == seqlen_k, so top-left and bottom-right
// alignment agree). With Br == Bc, query tiles i < j see nothing of key tile j and are skipped.
//
// Measured on H100 (ladder_timings, B=1 H=8 S=512 D=64): forward 10.2 ms full, 5.6 ms causal;
// flashcore's fp16 tensor-core path: 0.016 ms (0.014 ms causal). Eight single-warp blocks on a
// 132-SM GPU, and O, m, l through global memory for each of the 256 (i, j) tile pairs.
#include <cute/tensor.hpp>

#include <cstdint>

#include "algo1_common.cuh"
#include "ladder_check.h"
#include "rungs.h"

namespace flashcore::ladder {
namespace {

constexpr const char* kRung = "algo1";
const std::vector<int>& kHeadDims = kAlgo1HeadDims;

struct Algo1Params {
  const float* q;
  const float* k;
  const float* v;
  float* o;
  float* lse;       // optional
  float* row_max;   // m, (batch, heads, seqlen) scratch
  float* row_sum;   // l, same
  int heads;
  int seqlen;
  float scale;
  bool causal;
};

template <int kHeadDim>
struct Algo1Tiles {
  static constexpr int kBlockM = 32;  // Br: query rows per tile, one thread each
  static constexpr int kBlockN = 32;  // Bc: keys per tile
  static constexpr int kThreads = kBlockM;
  using SmemLayoutQ = decltype(cute::make_layout(cute::make_shape(cute::Int<kBlockM>{}, cute::Int<kHeadDim>{}),
                                                 cute::make_stride(cute::Int<kHeadDim + 1>{}, cute::_1{})));
  using SmemLayoutKV = decltype(cute::make_layout(cute::make_shape(cute::Int<kBlockN>{}, cute::Int<kHeadDim>{}),
                                                  cute::LayoutRight{}));
  using SmemLayoutS = decltype(cute::make_layout(cute::make_shape(cute::Int<kBlockM>{}, cute::Int<kBlockN>{}),
                                                 cute::make_stride(cute::Int<kBlockN + 1>{}, cute::_1{})));
};

template <int kHeadDim>
__global__ void __launch_bounds__(Algo1Tiles<kHeadDim>::kThreads) algo1_forward_kernel(Algo1Params params) {
  using namespace cute;
  using Tiles = Algo1Tiles<kHeadDim>;
  constexpr int kBlockM = Tiles::kBlockM;
  constexpr int kBlockN = Tiles::kBlockN;
  constexpr int kThreads = Tiles::kThreads;

  __shared__ float smem_q[cosize_v<typename Tiles::SmemLayoutQ>];
  __shared__ float smem_k[cosize_v<typename Tiles::SmemLayoutKV>];
  __shared__ float smem_v[cosize_v<typename Tiles::SmemLayoutKV>];
  __shared__ float smem_s[cosize_v<typename Tiles::SmemLayoutS>];
  Tensor sQ = make_tensor(make_smem_ptr(smem_q), typename Tiles::SmemLayoutQ{});   // (kBlockM, kHeadDim)
  Tensor sK = make_tensor(make_smem_ptr(smem_k), typename Tiles::SmemLayoutKV{});  // (kBlockN, kHeadDim)
  Tensor sV = make_tensor(make_smem_ptr(smem_v), typename Tiles::SmemLayoutKV{});  // (kBlockN, kHeadDim)
  Tensor sS = make_tensor(make_smem_ptr(smem_s), typename Tiles::SmemLayoutS{});   // (kBlockM, kBlockN)

  const int tid = threadIdx.x;
  const int head = blockIdx.x, batch = blockIdx.y;
  const int n = params.seqlen;
  Tensor gQ = head_view<kHeadDim>(params.q, batch, head, params.heads, n);  // (seqlen, kHeadDim)
  Tensor gK = head_view<kHeadDim>(params.k, batch, head, params.heads, n);  // (seqlen, kHeadDim)
  Tensor gV = head_view<kHeadDim>(params.v, batch, head, params.heads, n);  // (seqlen, kHeadDim)
  Tensor gO = head_view<kHeadDim>(params.o, batch, head, params.heads, n);  // (seqlen, kHeadDim)
  const std::int64_t stats_offset = (static_cast<std::int64_t>(batch) * params.heads + head) * n;
  Tensor gM = make_tensor(make_gmem_ptr(params.row_max + stats_offset), make_layout(n));  // (seqlen)
  Tensor gL = make_tensor(make_gmem_ptr(params.row_sum + stats_offset), make_layout(n));  // (seqlen)

  // Line 2: O = 0, l = 0, m = -inf. Thread t owns rows t, t + kBlockM, ... for the whole kernel,
  // so its own later reads see these writes without any synchronisation.
  for (int row = tid; row < n; row += kBlockM) {
    for (int d = 0; d < kHeadDim; ++d) gO(row, d) = 0.0f;
    gM(row) = -INFINITY;
    gL(row) = 0.0f;
  }

  const int num_tiles = (n + kBlockN - 1) / kBlockN;  // Br == Bc: as many query tiles as key tiles
  for (int j = 0; j < num_tiles; ++j) {
    const int key0 = j * kBlockN;
    __syncthreads();  // every thread is done with the previous K_j and V_j
    load_tile<kThreads>(sK, local_tile(gK, Shape<Int<kBlockN>, Int<kHeadDim>>{}, make_coord(j, 0)), n - key0);
    load_tile<kThreads>(sV, local_tile(gV, Shape<Int<kBlockN>, Int<kHeadDim>>{}, make_coord(j, 0)), n - key0);

    for (int i = params.causal ? j : 0; i < num_tiles; ++i) {
      const int row = i * kBlockM + tid;
      __syncthreads();  // every thread is done with the previous Q_i
      load_tile<kThreads>(sQ, local_tile(gQ, Shape<Int<kBlockM>, Int<kHeadDim>>{}, make_coord(i, 0)), n - i * kBlockM);
      __syncthreads();  // Q_i, K_j and V_j are in shared memory
      if (row >= n) continue;

      // Line 9: S_ij = scale * Q_i K_j^T, this thread's row; hidden keys score -inf. Every row
      // sees at least key0: key0 < n, and causal rows have row >= i * Br >= j * Bc = key0.
      float q_row[kHeadDim];
      CUTE_UNROLL
      for (int d = 0; d < kHeadDim; ++d) q_row[d] = sQ(tid, d);
      float tile_max = -INFINITY;
      for (int c = 0; c < kBlockN; ++c) {
        const int key = key0 + c;
        float s = -INFINITY;
        if (key < n && (!params.causal || key <= row)) {
          s = 0.0f;
          CUTE_UNROLL
          for (int d = 0; d < kHeadDim; ++d) s += q_row[d] * sK(c, d);
          s *= params.scale;
        }
        sS(tid, c) = s;
        tile_max = fmaxf(tile_max, s);
      }
      // Line 10: P~_ij = exp(S_ij - m~), l~ = rowsum(P~_ij).
      float tile_sum = 0.0f;
      for (int c = 0; c < kBlockN; ++c) {
        const float p = expf(sS(tid, c) - tile_max);
        sS(tid, c) = p;
        tile_sum += p;
      }
      // Lines 11-13: merge with the running statistics; O is stored normalised by l, so the old
      // output's weight is e^(m - m_new) l (0 on the first visit, where m = -inf and l = 0).
      const float m_prev = gM(row);
      const float m_new = fmaxf(m_prev, tile_max);
      const float old_weight = expf(m_prev - m_new) * gL(row);
      const float new_weight = expf(tile_max - m_new);
      const float l_new = old_weight + new_weight * tile_sum;
      float pv[kHeadDim];
      CUTE_UNROLL
      for (int d = 0; d < kHeadDim; ++d) pv[d] = 0.0f;
      for (int c = 0; c < kBlockN; ++c) {
        const float p = sS(tid, c);
        CUTE_UNROLL
        for (int d = 0; d < kHeadDim; ++d) pv[d] += p * sV(c, d);
      }
      CUTE_UNROLL
      for (int d = 0; d < kHeadDim; ++d) gO(row, d) = (old_weight * gO(row, d) + new_weight * pv[d]) / l_new;
      gM(row) = m_new;
      gL(row) = l_new;
    }
  }

  if (params.lse != nullptr) {
    Tensor gLse = make_tensor(make_gmem_ptr(params.lse + stats_offset), make_layout(n));  // (seqlen)
    for (int row = tid; row < n; row += kBlockM) gLse(row) = gM(row) + logf(gL(row));
  }
}

}  // namespace

Status algo1_forward(const LadderProblem& p, const void* q, const void* k, const void* v, void* o, float* lse,
                     cudaStream_t stream) {
  LADDER_RETURN_IF_ERROR(check_problem(p, kHeadDims, kRung));
  LADDER_RETURN_IF_ERROR(check_pointers({{q, "q"}, {k, "k"}, {v, "v"}, {o, "o"}}, kRung));
  const std::size_t stats = static_cast<std::size_t>(p.batch) * p.heads * p.seqlen;
  float* scratch = nullptr;
  LADDER_CUDA_RETURN_IF_ERROR(cudaMallocAsync(reinterpret_cast<void**>(&scratch), 2 * stats * sizeof(float), stream));
  const Algo1Params params{static_cast<const float*>(q), static_cast<const float*>(k), static_cast<const float*>(v),
                           static_cast<float*>(o), lse, scratch, scratch + stats, p.heads, p.seqlen,
                           p.softmax_scale, p.causal};
  const dim3 grid(p.heads, p.batch);
  if (p.head_dim == 32) {
    algo1_forward_kernel<32><<<grid, Algo1Tiles<32>::kThreads, 0, stream>>>(params);
  } else {
    algo1_forward_kernel<64><<<grid, Algo1Tiles<64>::kThreads, 0, stream>>>(params);
  }
  const Status launched = launch_status("algo1_forward_kernel");
  const Status freed = cuda_status(cudaFreeAsync(scratch, stream), "cudaFreeAsync");
  return launched.ok() ? freed : launched;
}

}  // namespace flashcore::ladder
