// The teaching ladder's common interface: each rung is a small attention implementation kept as a
// runnable baseline (naive three-kernel attention, FlashAttention Algorithm 1 in CuTe, its
// backward, a WMMA tensor-core rung). The CLI (`flashcore run --impl NAME`) and the benchmark's
// latency table find them here by name.
//
// Tensors are CUDA device pointers, contiguous, in flashcore's layout:
//   q, o, dq, do : (batch, seqlen, heads, head_dim);  k, v, dk, dv : same (no GQA on the ladder)
//   lse          : (batch, heads, seqlen), float32
// Element type: `Rung::dtype` (float32 for the scalar rungs; fp16 for the WMMA rung).
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "flashcore/tensor.h"

namespace flashcore::ladder {

struct LadderProblem {
  int batch = 1;
  int heads = 1;
  int seqlen = 1;
  int head_dim = 64;
  bool causal = false;
  float softmax_scale = 0.125f;
};

struct Rung {
  std::string name;         // the CLI's --impl value, e.g. "naive", "algo1", "wmma"
  std::string description;  // one line for --help
  DType dtype;              // element type of q, k, v, o (and of the gradients)
  // Forward: writes o and, when lse != nullptr, the log-sum-exp. May allocate scratch itself
  // (the naive rung materialises N x N scores: that is its point).
  Status (*forward)(const LadderProblem& p, const void* q, const void* k, const void* v, void* o, float* lse,
                    cudaStream_t stream);
  // Backward (nullptr when the rung has none): from the forward's o and lse.
  Status (*backward)(const LadderProblem& p, const void* q, const void* k, const void* v, const void* o,
                     const void* dout, const float* lse, void* dq, void* dk, void* dv, cudaStream_t stream);
  // Head dims the rung supports; causal is supported by every rung.
  std::vector<int> head_dims;
};

// Every rung in ladder order.
const std::vector<Rung>& rungs();
// The rung called `name`, or nullptr.
const Rung* find_rung(const std::string& name);

}  // namespace flashcore::ladder
