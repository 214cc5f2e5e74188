// Problems the kernels cannot read in place run on staged copies: a head dim that is not a
// multiple of 8 (the kernels move 16-byte vectors of 8 elements), or rows that do not start
// 16-byte aligned (strides or a data pointer off by a few elements). The inputs are copied into
// contiguous (batch, seqlen, heads, head_dim rounded up to 8) buffers, the extra columns zero (they
// add nothing to a dot product), the kernels run on those, and the outputs' real columns are
// copied back. FlashAttention pads head dims the same way in Python; here every caller gets it.
//
// The copies come from the stream-ordered allocator and are freed on the stream, so the caller's
// backward workspace never has to cover them; they cost a pass over the tensors, which the
// benchmarked shapes (head dims 64..256, aligned) never take.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "api/problem.h"

namespace flashcore::cuda {

// Whether the call needs staged copies: head_dim % 8 != 0, or a tensor whose rows are not
// 16-byte aligned.
bool needs_staging(const detail::AttentionProblem& p, std::initializer_list<const TensorView*> tensors);

// The problem the kernels see: head_dim rounded up to a multiple of 8.
detail::AttentionProblem staged_problem(const detail::AttentionProblem& p);

// A packed varlen tensor (total, heads, head_dim) as the kernels and the staging read it: a
// (1, total, heads, head_dim) view with batch stride 0 (each sequence's first row comes from
// cu_seqlens). A (heads, total) LSE becomes (1, heads, total). Only for varlen calls: a dense
// call's (batch, heads, seqlen) LSE has rank 3 too.
inline TensorView packed_as_dense(const TensorView& t) {
  if (!t.present() || t.rank == 4 || t.rank < 2) return t;
  TensorView d = t;
  d.rank = t.rank + 1;
  for (int i = t.rank; i > 0; --i) {
    d.shape[i] = t.shape[i - 1];
    d.stride[i] = t.stride[i - 1];
  }
  d.shape[0] = 1;
  d.stride[0] = 0;
  return d;
}

// Staged copies on one stream, freed (stream-ordered) when the area goes away.
class StagingArea {
 public:
  explicit StagingArea(cudaStream_t stream) : stream_(stream) {}
  ~StagingArea();
  StagingArea(const StagingArea&) = delete;
  StagingArea& operator=(const StagingArea&) = delete;

  // A contiguous copy of the (batch, seqlen, heads, head_dim) tensor `t` with `head_dim`
  // columns, zero past t's own.
  Status stage_input(const TensorView& t, std::int64_t head_dim, TensorView* staged);
  // An uninitialised contiguous buffer for an output like `t` with `head_dim` columns.
  Status stage_output(const TensorView& t, std::int64_t head_dim, TensorView* staged);
  // Copies the first dst.shape[3] columns of `staged` into `dst`.
  Status unstage(const TensorView& staged, const TensorView& dst);

 private:
  Status allocate(const TensorView& like, std::int64_t head_dim, TensorView* staged);

  cudaStream_t stream_;
  std::vector<void*> buffers_;
};

}  // namespace flashcore::cuda
