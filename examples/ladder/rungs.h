// Entry points of the ladder's rungs, one pair per rung file; registry.cpp lists them as Rungs.
// Every function checks its arguments and returns a Status; none synchronises the stream except
// where a rung's header says so.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "ladder.h"

namespace flashcore::ladder {

// Rung 2 (rung2_naive.cu): three kernels through N x N scores in global memory, float32.
inline const std::vector<int> kNaiveHeadDims = {32, 64, 128};
Status naive_forward(const LadderProblem& p, const void* q, const void* k, const void* v, void* o, float* lse,
                     cudaStream_t stream);
Status naive_backward(const LadderProblem& p, const void* q, const void* k, const void* v, const void* o,
                      const void* dout, const float* lse, void* dq, void* dk, void* dv, cudaStream_t stream);

// Rung 3 (rung3_algo1.cu): FlashAttention Algorithm 1 with CuTe shared-memory layouts, float32.
inline const std::vector<int> kAlgo1HeadDims = {32, 64};
Status algo1_forward(const LadderProblem& p, const void* q, const void* k, const void* v, void* o, float* lse,
                     cudaStream_t stream);
// Rung 4 (rung4_algo1_backward.cu): its backward, dK and dV by atomicAdd, float32.
Status algo1_backward(const LadderProblem& p, const void* q, const void* k, const void* v, const void* o,
                      const void* dout, const float* lse, void* dq, void* dk, void* dv, cudaStream_t stream);

// Rung 5 (rung5_wmma.cu): the tiled online-softmax forward on tensor cores through WMMA, fp16.
inline const std::vector<int> kWmmaHeadDims = {32, 64};
Status wmma_forward(const LadderProblem& p, const void* q, const void* k, const void* v, void* o, float* lse,
                    cudaStream_t stream);

}  // namespace flashcore::ladder
