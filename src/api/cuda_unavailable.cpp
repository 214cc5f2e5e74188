// Stand-ins for the CUDA backend in a CPU-only build (no nvcc was found at configure time).
#include "api/cuda_backend.h"

namespace flashcore::cuda {
namespace {
Status unavailable() {
  return Status::NotSupported(
      "flashcore was built without CUDA (no nvcc at configure time); use CPU tensors or rebuild with CUDA");
}
}  // namespace

Status forward(const ForwardParams&, const detail::AttentionProblem&) { return unavailable(); }
Status backward_workspace_size(const BackwardParams&, const detail::AttentionProblem&, std::size_t*) {
  return unavailable();
}
Status backward(const BackwardParams&, const detail::AttentionProblem&) { return unavailable(); }
Status forward_family(const ForwardParams&, const detail::AttentionProblem&, KernelFamily*) { return unavailable(); }
Status backward_family(const BackwardParams&, const detail::AttentionProblem&, KernelFamily*) { return unavailable(); }
Status forward_paged(const ForwardParams&, const detail::PagedKv&) { return unavailable(); }
Status merge_partials(const MergeParams&, const detail::MergeProblem&) { return unavailable(); }
Status copy_kvcache_indices(const KvCacheParams&, const detail::KvCacheProblem&, detail::KvCacheIndices*) {
  return unavailable();
}
Status forward_kvcache(const KvCacheParams&, const detail::KvCacheProblem&, const detail::KvCacheIndices*) {
  return unavailable();
}

}  // namespace flashcore::cuda
