// Rung 5: the tiled online-softmax forward with both products on tensor cores, through the
// portable nvcuda::wmma fragments (fp16 in, fp32 accumulate).
//
// Idea: the loop order of FlashAttention-2 (a block per 64-query tile, looping over 64-key tiles,
// running max and sum kept on chip), with S = Q K^T and O += P V each issued as 16 x 16 x 16
// tensor-core products. Each of the 4 warps owns 16 query rows. What this rung shows is what
// tensor cores alone buy over rung 3's scalar FMAs; what it still lacks is what the CuTe mma.sync
// path adds: WMMA fragments have an opaque element-to-thread mapping, so the softmax cannot run
// on the accumulators in registers. Every tile's scores make a round trip through shared memory
// (store S as float, read it back, write P as half), and the output accumulator lives in shared
// memory so that its rows can be rescaled between tiles.
//
// Softmax in the exp2 domain: scores are multiplied by scale * log2(e) once, so each
// probability is one exp2f. Two lanes share a row (lane 2r and 2r + 1 hold row r of the warp's 16,
// alternating columns) and combine their partial max and sum with one shuffle.
//
// Masking: keys past seqlen and, when causal, keys after the query (seqlen_q == seqlen_k, so
// top-left and bottom-right alignment agree) score -inf; key tiles wholly after the query tile
// are skipped. Rows past seqlen are computed on zero queries and never stored.
//
// Measured on H100 (ladder_timings, B=1 H=8 S=512 D=64): forward 0.041 ms full and causal
// (13.1 TFLOP/s full); flashcore's fp16 mma.sync path: 0.016 ms (0.014 ms causal).
#include <cuda_fp16.h>
#include <mma.h>

#include <cstdint>

#include "ladder_check.h"
#include "rungs.h"

namespace flashcore::ladder {
namespace {

constexpr const char* kRung = "wmma";

struct WmmaParams {
  const half* q;
  const half* k;
  const half* v;
  half* o;
  float* lse;  // optional
  int heads;
  int seqlen;
  float scale_log2;  // softmax_scale * log2(e)
  bool causal;
};

template <int kHeadDim>
struct WmmaTiles {
  static constexpr int kFrag = 16;  // WMMA's m = n = k for half inputs
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBlockM = kFrag * kWarps;  // 64 query rows, 16 per warp
  static constexpr int kBlockN = 64;              // keys per tile
  // Row strides in elements. WMMA loads need a multiple of 16 bytes; the extra 16 bytes shift
  // consecutive rows across banks so fragment loads do not all hit the same ones.
  static constexpr int kLdQKV = kHeadDim + 8;  // half
  static constexpr int kLdP = kBlockN + 8;     // half
  static constexpr int kLdS = kBlockN + 4;     // float
  static constexpr int kLdO = kHeadDim + 4;    // float
  static constexpr int kQElems = kBlockM * kLdQKV;
  static constexpr int kKVElems = kBlockN * kLdQKV;
  static constexpr int kPElems = kBlockM * kLdP;
  static constexpr int kSmemBytes = (kQElems + 2 * kKVElems + kPElems) * 2 + (kBlockM * kLdS + kBlockM * kLdO) * 4;
  static_assert(kHeadDim % kFrag == 0, "head dim must be a multiple of the fragment size");
  // Every region is a multiple of 32 bytes long, so each starts 32-byte aligned as WMMA requires.
  static_assert((kQElems * 2) % 32 == 0 && (kKVElems * 2) % 32 == 0 && (kPElems * 2) % 32 == 0);
};

// Copies `rows` rows (the rest zero-filled) of kHeadDim halves into shared memory, 16 bytes per
// thread per step. Global rows must start 16-byte aligned (checked on the host).
template <int kRows, int kHeadDim, int kLd, int kThreads>
__device__ void load_tile_fp16(half* smem, const half* gmem, std::int64_t row_stride, int rows) {
  constexpr int kVecsPerRow = kHeadDim / 8;
  for (int idx = threadIdx.x; idx < kRows * kVecsPerRow; idx += kThreads) {
    const int r = idx / kVecsPerRow, c = (idx % kVecsPerRow) * 8;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (r < rows) value = *reinterpret_cast<const uint4*>(gmem + r * row_stride + c);
    *reinterpret_cast<uint4*>(smem + r * kLd + c) = value;
  }
}

template <int kHeadDim>
__global__ void __launch_bounds__(WmmaTiles<kHeadDim>::kThreads) wmma_forward_kernel(WmmaParams params) {
  using namespace nvcuda;
  using Tiles = WmmaTiles<kHeadDim>;
  constexpr int kFrag = Tiles::kFrag, kBlockM = Tiles::kBlockM, kBlockN = Tiles::kBlockN;
  constexpr int kLdQKV = Tiles::kLdQKV, kLdP = Tiles::kLdP, kLdS = Tiles::kLdS, kLdO = Tiles::kLdO;
  constexpr int kThreads = Tiles::kThreads;

  extern __shared__ __align__(128) unsigned char smem[];
  half* sQ = reinterpret_cast<half*>(smem);  // (kBlockM, kHeadDim), row stride kLdQKV
  half* sK = sQ + Tiles::kQElems;            // (kBlockN, kHeadDim)
  half* sV = sK + Tiles::kKVElems;           // (kBlockN, kHeadDim)
  half* sP = sV + Tiles::kKVElems;           // (kBlockM, kBlockN), row stride kLdP
  float* sS = reinterpret_cast<float*>(sP + Tiles::kPElems);  // (kBlockM, kBlockN), row stride kLdS
  float* sO = sS + kBlockM * kLdS;                            // (kBlockM, kHeadDim), row stride kLdO

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tile_i = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
  const int n = params.seqlen;
  const std::int64_t row_stride = static_cast<std::int64_t>(params.heads) * kHeadDim;
  const std::int64_t head_offset =
      static_cast<std::int64_t>(batch) * n * row_stride + static_cast<std::int64_t>(head) * kHeadDim;
  const int row0 = tile_i * kBlockM;

  load_tile_fp16<kBlockM, kHeadDim, kLdQKV, kThreads>(sQ, params.q + head_offset + row0 * row_stride, row_stride, n - row0);
  for (int idx = threadIdx.x; idx < kBlockM * kLdO; idx += kThreads) sO[idx] = 0.0f;
  __syncthreads();

  // This warp's 16 query rows as A operands, loaded once for all key tiles.
  half* sQ_warp = sQ + warp * kFrag * kLdQKV;
  float* sS_warp = sS + warp * kFrag * kLdS;
  half* sP_warp = sP + warp * kFrag * kLdP;
  float* sO_warp = sO + warp * kFrag * kLdO;
  wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, half, wmma::row_major> q_frag[kHeadDim / kFrag];
  for (int kk = 0; kk < kHeadDim / kFrag; ++kk) wmma::load_matrix_sync(q_frag[kk], sQ_warp + kk * kFrag, kLdQKV);

  // Lanes 2r and 2r + 1 own row r of the warp's 16; `half_lane` picks their alternating columns.
  const int warp_row = lane / 2, half_lane = lane % 2;
  const int query = row0 + warp * kFrag + warp_row;
  float* s_row = sS_warp + warp_row * kLdS;
  half* p_row = sP_warp + warp_row * kLdP;
  float* o_row = sO_warp + warp_row * kLdO;
  float row_max = -INFINITY;  // running max of scale * log2(e) * score
  float row_sum = 0.0f;       // running sum of exp2(score - row_max), both lanes hold the total

  const int last_key = params.causal ? min(n, row0 + kBlockM) : n;  // one past the last key any row sees
  const int num_key_tiles = (last_key + kBlockN - 1) / kBlockN;
  for (int j = 0; j < num_key_tiles; ++j) {
    const int key0 = j * kBlockN;
    __syncthreads();  // every warp is done with the previous K and V tiles
    const std::int64_t tile_offset = head_offset + key0 * row_stride;
    load_tile_fp16<kBlockN, kHeadDim, kLdQKV, kThreads>(sK, params.k + tile_offset, row_stride, n - key0);
    load_tile_fp16<kBlockN, kHeadDim, kLdQKV, kThreads>(sV, params.v + tile_offset, row_stride, n - key0);
    __syncthreads();

    // S = Q K^T on tensor cores. K is stored (key, dim) row-major, which read as a column-major
    // (dim, key) matrix is exactly K^T: no transposed copy.
    for (int nn = 0; nn < kBlockN / kFrag; ++nn) {
      wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> s_frag;
      wmma::fill_fragment(s_frag, 0.0f);
      for (int kk = 0; kk < kHeadDim / kFrag; ++kk) {
        wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, half, wmma::col_major> k_frag;
        wmma::load_matrix_sync(k_frag, sK + nn * kFrag * kLdQKV + kk * kFrag, kLdQKV);
        wmma::mma_sync(s_frag, q_frag[kk], k_frag, s_frag);
      }
      wmma::store_matrix_sync(sS_warp + nn * kFrag, s_frag, kLdS, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax on this warp's rows.
    float tile_max = -INFINITY;
    for (int c = half_lane; c < kBlockN; c += 2) {
      const int key = key0 + c;
      const bool visible = key < n && (!params.causal || key <= query);
      const float s = visible ? s_row[c] * params.scale_log2 : -INFINITY;
      s_row[c] = s;
      tile_max = fmaxf(tile_max, s);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffff, tile_max, 1));
    const float new_max = fmaxf(row_max, tile_max);
    // A row that has seen only hidden keys keeps max -inf; subtract 0 instead so that
    // exp2(-inf - 0) = 0 rather than exp2(-inf + inf) = NaN.
    const float max_used = new_max == -INFINITY ? 0.0f : new_max;
    const float correction = exp2f(row_max - max_used);
    float tile_sum = 0.0f;
    for (int c = half_lane; c < kBlockN; c += 2) {
      const float p = exp2f(s_row[c] - max_used);
      p_row[c] = __float2half(p);
      tile_sum += p;
    }
    tile_sum += __shfl_xor_sync(0xffffffff, tile_sum, 1);
    row_sum = row_sum * correction + tile_sum;
    row_max = new_max;
    for (int d = half_lane; d < kHeadDim; d += 2) o_row[d] *= correction;
    __syncwarp();

    // O += P V on tensor cores, the accumulator round-tripping through shared memory.
    for (int dd = 0; dd < kHeadDim / kFrag; ++dd) {
      wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> o_frag;
      wmma::load_matrix_sync(o_frag, sO_warp + dd * kFrag, kLdO, wmma::mem_row_major);
      for (int kk = 0; kk < kBlockN / kFrag; ++kk) {
        wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, half, wmma::row_major> p_frag;
        wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, half, wmma::row_major> v_frag;
        wmma::load_matrix_sync(p_frag, sP_warp + kk * kFrag, kLdP);
        wmma::load_matrix_sync(v_frag, sV + kk * kFrag * kLdQKV + dd * kFrag, kLdQKV);
        wmma::mma_sync(o_frag, p_frag, v_frag, o_frag);
      }
      wmma::store_matrix_sync(sO_warp + dd * kFrag, o_frag, kLdO, wmma::mem_row_major);
    }
    __syncwarp();
  }

  // Epilogue: O / l rounded to fp16. The warp writes its 16 rows together, consecutive lanes on
  // consecutive columns, taking each row's 1 / l from the lane that owns the row.
  const float inv_sum = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;
  for (int idx = lane; idx < kFrag * kHeadDim; idx += 32) {
    const int r = idx / kHeadDim, d = idx % kHeadDim;
    const float scale = __shfl_sync(0xffffffff, inv_sum, 2 * r);
    const int row = row0 + warp * kFrag + r;
    if (row < n) params.o[head_offset + row * row_stride + d] = __float2half(sO_warp[r * kLdO + d] * scale);
  }
  if (params.lse != nullptr && half_lane == 0 && query < n) {
    constexpr float kLn2 = 0.69314718055994531f;
    params.lse[(static_cast<std::int64_t>(batch) * params.heads + head) * n + query] =
        row_sum > 0.0f ? row_max * kLn2 + logf(row_sum) : -INFINITY;
  }
}

template <int kHeadDim>
Status launch_wmma_forward(const WmmaParams& params, int batch, cudaStream_t stream) {
  using Tiles = WmmaTiles<kHeadDim>;
  // Above 48 KiB a kernel must opt in to its dynamic shared memory.
  LADDER_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(wmma_forward_kernel<kHeadDim>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize, Tiles::kSmemBytes));
  const dim3 grid((params.seqlen + Tiles::kBlockM - 1) / Tiles::kBlockM, params.heads, batch);
  wmma_forward_kernel<kHeadDim><<<grid, Tiles::kThreads, Tiles::kSmemBytes, stream>>>(params);
  return launch_status("wmma_forward_kernel");
}

}  // namespace

Status wmma_forward(const LadderProblem& p, const void* q, const void* k, const void* v, void* o, float* lse,
                    cudaStream_t stream) {
  LADDER_RETURN_IF_ERROR(check_problem(p, kWmmaHeadDims, kRung));
  LADDER_RETURN_IF_ERROR(check_pointers({{q, "q"}, {k, "k"}, {v, "v"}, {o, "o"}}, kRung));
  for (const auto& [ptr, name] : {NamedPointer{q, "q"}, NamedPointer{k, "k"}, NamedPointer{v, "v"}}) {
    if (reinterpret_cast<std::uintptr_t>(ptr) % 16 != 0) {
      return Status::InvalidArgument(std::string("ladder rung 'wmma': ") + name +
                                     " must be 16-byte aligned (the kernel loads 8 halves at a time)");
    }
  }
  constexpr float kLog2e = 1.4426950408889634f;
  const WmmaParams params{static_cast<const half*>(q), static_cast<const half*>(k), static_cast<const half*>(v),
                          static_cast<half*>(o), lse, p.heads, p.seqlen, p.softmax_scale * kLog2e, p.causal};
  return p.head_dim == 32 ? launch_wmma_forward<32>(params, p.batch, stream)
                          : launch_wmma_forward<64>(params, p.batch, stream);
}

}  // namespace flashcore::ladder
