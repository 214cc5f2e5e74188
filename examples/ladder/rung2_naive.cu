// Rung 2: naive attention, the textbook formula as three kernels from rung 1, float32.
//
// Idea: S = scale * Q K^T (tiled matmul, reading K transposed in place), P = softmax(S) row by
// row with the causal mask, O = P V (tiled matmul). The N x N score matrix of every (batch, head)
// lives in global memory: batch * heads * seqlen^2 floats, 8 GiB at batch 1, 8 heads, seqlen
// 16384, and each element is written and read again by the next kernel. That traffic and that
// footprint are what FlashAttention removes.
//
// The backward pass materialises two such matrices (P and dS):
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dO * O)),  dQ = scale dS K,  dK = scale dS^T Q.
//
// Scratch comes from cudaMallocAsync on the caller's stream and goes back with cudaFreeAsync, so
// the stream order (not a device-wide synchronisation) keeps it alive while the kernels run.
//
// Measured on H100 (ladder_timings, B=1 H=8 S=512 D=64, full; causal the same): forward 0.101 ms,
// backward 0.249 ms; flashcore's fp16 tensor-core path: forward 0.016 ms, backward 0.039 ms. At
// this size the 8 MiB of scores stay in L2; the cost grows with seqlen^2 from there.
#include <cstdint>

#include "ladder_check.h"
#include "rung1_matmul.cuh"
#include "rung1_softmax.cuh"
#include "rungs.h"

namespace flashcore::ladder {
namespace {

constexpr const char* kRung = "naive";
const std::vector<int>& kHeadDims = kNaiveHeadDims;

// The (seqlen, head_dim) matrices of a (batch, seqlen, heads, head_dim) tensor, indexed
// z = b * heads + h.
template <class T>
MatrixBatch<T> head_matrices(T* data, const LadderProblem& p) {
  const std::int64_t row = static_cast<std::int64_t>(p.heads) * p.head_dim;
  return {data, row, row * p.seqlen, p.head_dim};
}

// The (seqlen, seqlen) matrices of a (batch, heads, seqlen, seqlen) scratch buffer, same z.
template <class T>
MatrixBatch<T> score_matrices(T* data, const LadderProblem& p) {
  const std::int64_t n = p.seqlen;
  return {data, n, n * n * p.heads, n * n};
}

Status launch_softmax(const LadderProblem& p, float* scores, float* lse, cudaStream_t stream) {
  int device = 0, num_sms = 0;
  LADDER_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  LADDER_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t rows = static_cast<std::int64_t>(p.batch) * p.heads * p.seqlen;
  launch_softmax_rows(scores, rows, p.seqlen, p.seqlen, p.causal, lse, num_sms, stream);
  return launch_status("softmax_rows");
}

// scores <- scale * Q K^T, then softmax in place (P); lse optional.
Status probabilities(const LadderProblem& p, const float* q, const float* k, float* scores, float* lse,
                     cudaStream_t stream) {
  const int bh = p.batch * p.heads;
  launch_matmul_tiled<false, true>(p.seqlen, p.seqlen, p.head_dim, p.softmax_scale, head_matrices(q, p),
                                   head_matrices(k, p), score_matrices(scores, p), bh, p.heads, stream);
  LADDER_RETURN_IF_ERROR(launch_status("matmul_tiled (Q K^T)"));
  return launch_softmax(p, scores, lse, stream);
}

Status allocate_scores(const LadderProblem& p, float** scores, cudaStream_t stream) {
  const std::size_t bytes =
      static_cast<std::size_t>(p.batch) * p.heads * p.seqlen * static_cast<std::size_t>(p.seqlen) * sizeof(float);
  return cuda_status(cudaMallocAsync(reinterpret_cast<void**>(scores), bytes, stream),
                     "cudaMallocAsync (naive rung's N x N scores)");
}

// dS <- P * (dP - D), D = rowsum(dO * O) for the row's query: one warp per score row.
__global__ void softmax_backward_rows(const float* probs, float* dscores, const float* out, const float* dout,
                                      LadderProblem p) {
  const int lane = threadIdx.x % 32;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const std::int64_t n = p.seqlen;
  if (row >= static_cast<std::int64_t>(p.batch) * p.heads * n) return;
  const std::int64_t z = row / n, query = row % n;
  const std::int64_t b = z / p.heads, h = z % p.heads;
  const std::int64_t offset = ((b * n + query) * p.heads + h) * p.head_dim;

  float d = 0.0f;
  for (int i = lane; i < p.head_dim; i += 32) d += dout[offset + i] * out[offset + i];
  #pragma unroll
  for (int s = 16; s > 0; s /= 2) d += __shfl_xor_sync(0xffffffff, d, s);

  const float* p_row = probs + row * n;
  float* ds_row = dscores + row * n;
  for (std::int64_t c = lane; c < n; c += 32) ds_row[c] = p_row[c] * (ds_row[c] - d);
}

}  // namespace

Status naive_forward(const LadderProblem& p, const void* q, const void* k, const void* v, void* o, float* lse,
                     cudaStream_t stream) {
  LADDER_RETURN_IF_ERROR(check_problem(p, kHeadDims, kRung));
  LADDER_RETURN_IF_ERROR(check_pointers({{q, "q"}, {k, "k"}, {v, "v"}, {o, "o"}}, kRung));
  const auto* qf = static_cast<const float*>(q);
  const auto* kf = static_cast<const float*>(k);
  const auto* vf = static_cast<const float*>(v);
  float* scores = nullptr;
  LADDER_RETURN_IF_ERROR(allocate_scores(p, &scores, stream));
  Status status = probabilities(p, qf, kf, scores, lse, stream);
  if (status.ok()) {
    launch_matmul_tiled<false, false>(p.seqlen, p.head_dim, p.seqlen, 1.0f, score_matrices<const float>(scores, p),
                                      head_matrices(vf, p), head_matrices(static_cast<float*>(o), p),
                                      p.batch * p.heads, p.heads, stream);
    status = launch_status("matmul_tiled (P V)");
  }
  const Status freed = cuda_status(cudaFreeAsync(scores, stream), "cudaFreeAsync");
  return status.ok() ? freed : status;
}

Status naive_backward(const LadderProblem& p, const void* q, const void* k, const void* v, const void* o,
                      const void* dout, const float* /*lse: P is recomputed by the forward's own kernels*/,
                      void* dq, void* dk, void* dv, cudaStream_t stream) {
  LADDER_RETURN_IF_ERROR(check_problem(p, kHeadDims, kRung));
  LADDER_RETURN_IF_ERROR(check_pointers(
      {{q, "q"}, {k, "k"}, {v, "v"}, {o, "o"}, {dout, "dout"}, {dq, "dq"}, {dk, "dk"}, {dv, "dv"}}, kRung));
  const auto* qf = static_cast<const float*>(q);
  const auto* kf = static_cast<const float*>(k);
  const auto* vf = static_cast<const float*>(v);
  const auto* of = static_cast<const float*>(o);
  const auto* dof = static_cast<const float*>(dout);
  const int n = p.seqlen, d = p.head_dim, bh = p.batch * p.heads, heads = p.heads;

  float* probs = nullptr;
  float* dscores = nullptr;
  LADDER_RETURN_IF_ERROR(allocate_scores(p, &probs, stream));
  Status status = allocate_scores(p, &dscores, stream);
  if (status.ok()) status = probabilities(p, qf, kf, probs, nullptr, stream);
  if (status.ok()) {
    const auto P = score_matrices<const float>(probs, p);
    const auto dS = score_matrices(dscores, p);
    const auto dS_in = score_matrices<const float>(dscores, p);
    launch_matmul_tiled<true, false>(n, d, n, 1.0f, P, head_matrices(dof, p), head_matrices(static_cast<float*>(dv), p),
                                     bh, heads, stream);  // dV = P^T dO
    launch_matmul_tiled<false, true>(n, n, d, 1.0f, head_matrices(dof, p), head_matrices(vf, p), dS, bh, heads,
                                     stream);  // dP = dO V^T, into dS
    constexpr int kWarps = 4;
    const std::int64_t rows = static_cast<std::int64_t>(bh) * n;
    softmax_backward_rows<<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), kWarps * 32, 0, stream>>>(
        probs, dscores, of, dof, p);
    launch_matmul_tiled<false, false>(n, d, n, p.softmax_scale, dS_in, head_matrices(kf, p),
                                      head_matrices(static_cast<float*>(dq), p), bh, heads, stream);  // dQ = scale dS K
    launch_matmul_tiled<true, false>(n, d, n, p.softmax_scale, dS_in, head_matrices(qf, p),
                                     head_matrices(static_cast<float*>(dk), p), bh, heads, stream);  // dK = scale dS^T Q
    status = launch_status("naive backward kernels");
  }
  const Status freed_p = cuda_status(cudaFreeAsync(probs, stream), "cudaFreeAsync");
  const Status freed_ds = dscores ? cuda_status(cudaFreeAsync(dscores, stream), "cudaFreeAsync") : Status::Ok();
  if (!status.ok()) return status;
  return freed_p.ok() ? freed_ds : freed_p;
}

}  // namespace flashcore::ladder
