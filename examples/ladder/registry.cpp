// The ladder's rungs in teaching order, looked up by the CLI's --impl name.
#include "ladder.h"
#include "rungs.h"

namespace flashcore::ladder {

const std::vector<Rung>& rungs() {
  static const std::vector<Rung> table = {
      {"naive", "three kernels through the N x N scores in global memory (float32)", DType::kFloat32,
       naive_forward, naive_backward, kNaiveHeadDims},
      {"algo1", "FlashAttention Algorithm 1, one thread per query row, CuTe shared-memory layouts (float32)",
       DType::kFloat32, algo1_forward, algo1_backward, kAlgo1HeadDims},
      {"wmma", "tiled online softmax with both products on tensor cores through WMMA (fp16 in, fp32 accumulate)",
       DType::kFloat16, wmma_forward, nullptr, kWmmaHeadDims},
  };
  return table;
}

const Rung* find_rung(const std::string& name) {
  for (const Rung& rung : rungs()) {
    if (rung.name == name) return &rung;
  }
  return nullptr;
}

}  // namespace flashcore::ladder
