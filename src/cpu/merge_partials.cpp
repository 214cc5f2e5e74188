// CPU merge_partials (flashcore/merge.h): one pass over the rows, threaded over blocks of rows.
// Each row is converted to float32, merged with common/merge_weights.h's arithmetic (the CUDA
// backend's too) and written back in the output's dtype.
#include <algorithm>
#include <cstdint>

#include <cutlass/numeric_types.h>

#include "api/merge_problem.h"
#include "common/merge_weights.h"
#include "cpu/cpu_backend.h"
#include "cpu/element.h"
#include "cpu/parallel_for.h"

namespace flashcore::cpu {
namespace {

using std::int64_t;

// Rows per task: enough work to amortise handing it out, small enough to balance.
constexpr int64_t kRowsPerTask = 256;

float load(const TensorView& t, const void* row, int64_t d) {
  switch (t.dtype) {
    case DType::kFloat32: return static_cast<const float*>(row)[d];
    case DType::kBFloat16: return static_cast<float>(static_cast<const cutlass::bfloat16_t*>(row)[d]);
    case DType::kFloat16: return static_cast<float>(static_cast<const cutlass::half_t*>(row)[d]);
    case DType::kInt32: break;  // index tensors only; validation refuses them here
  }
  return 0.0f;
}

void store(const TensorView& t, void* row, int64_t d, float value) {
  switch (t.dtype) {
    case DType::kFloat32: static_cast<float*>(row)[d] = value; return;
    case DType::kBFloat16: static_cast<cutlass::bfloat16_t*>(row)[d] = static_cast<cutlass::bfloat16_t>(value); return;
    case DType::kFloat16: static_cast<cutlass::half_t*>(row)[d] = static_cast<cutlass::half_t>(value); return;
    case DType::kInt32: return;  // index tensors only; validation refuses them here
  }
}

// Address of row (b, s, h) of a (batch, seqlen, heads, head_dim) view, in bytes.
const void* row_address(const TensorView& t, int64_t b, int64_t s, int64_t h) {
  const int64_t offset = b * t.stride[0] + s * t.stride[1] + h * t.stride[2];
  return static_cast<const unsigned char*>(t.data) + offset * static_cast<int64_t>(dtype_size(t.dtype));
}

}  // namespace

Status merge_partials(const MergeParams& params, const detail::MergeProblem& p) {
  const int64_t rows = p.batch * p.seqlen * p.heads;
  const int64_t tasks = (rows + kRowsPerTask - 1) / kRowsPerTask;
  parallel_for(tasks, worker_count(params.num_threads, tasks), [&](int64_t task, int) {
    const int64_t end = std::min(rows, (task + 1) * kRowsPerTask);
    for (int64_t row = task * kRowsPerTask; row < end; ++row) {
      // Rows in (batch, seqlen, heads) order, the output's natural order.
      const int64_t h = row % p.heads;
      const int64_t s = (row / p.heads) % p.seqlen;
      const int64_t b = row / (p.heads * p.seqlen);
      const MergeWeights w = merge_weights(lse_at(params.lse_a, b, h, s), lse_at(params.lse_b, b, h, s));
      const void* a = row_address(params.out_a, b, s, h);
      const void* bb = row_address(params.out_b, b, s, h);
      void* out = const_cast<void*>(row_address(params.out, b, s, h));
      for (int64_t d = 0; d < p.head_dim; ++d) {
        store(params.out, out, d, merge_value(w, load(params.out_a, a, d), load(params.out_b, bb, d)));
      }
      if (params.lse.present()) lse_at(params.lse, b, h, s) = w.lse;
    }
  });
  return Status::Ok();
}

}  // namespace flashcore::cpu
