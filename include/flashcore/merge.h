// Merging partial attention results: what context parallelism (ring attention) and split-KV
// decoding need to combine attention computed over separate blocks of keys.
//
// Two calls of forward() on the same queries over disjoint sets of keys A and B give
//   out_a = softmax(s_A) v_A,  lse_a = log sum_{j in A} exp(s_j)      (and likewise for B).
// Attention over A ∪ B is then, exactly,
//   lse = log(exp(lse_a) + exp(lse_b))
//   out = exp(lse_a - lse) * out_a + exp(lse_b - lse) * out_b
// which merge_partials() computes, in float32 whatever the tensors' dtypes, with the larger LSE
// factored out so nothing overflows. Merging is associative and commutative, so any number of
// blocks can be folded in one at a time, in any order.
//
// Layout (attention.h's):
//   out_a, out_b, out : (batch, seqlen, heads, head_dim), float16, bfloat16 or float32, each its own
//   lse_a, lse_b, lse : (batch, heads, seqlen), float32, natural log
// Any non-negative strides, head_dim contiguous. `out` and `lse` may be the very same views as
// out_a/lse_a or out_b/lse_b (in place: each element is read before it is written); any other
// overlap between an output and an input is rejected. A float32 `out` keeps a running result at
// full precision between merges; a 16-bit one rounds once, when it is written.
//
// Rows: a row whose two LSEs are both -inf (it saw no key in either block) gets out 0 and lse
// -inf, as forward() gives rows that see no key. A row whose other LSE is -inf gets the finite
// side exactly (its weight is 1, the other's 0). NaN in an LSE makes the row's out and lse NaN; so
// does +inf (forward() never writes one: a +inf score makes its row NaN).
#pragma once

#include "flashcore/attention.h"
#include "flashcore/tensor.h"

namespace flashcore {

struct MergeParams {
  TensorView out_a;  // one partial result and its LSE
  TensorView lse_a;
  TensorView out_b;  // another, for the same queries over other keys
  TensorView lse_b;
  TensorView out;    // the merged result; may be out_a or out_b itself
  TensorView lse;    // optional (data == nullptr: not written); may be lse_a or lse_b itself
  Backend backend = Backend::kAuto;  // kAuto follows the tensors' device; the CPU backends are one
  void* stream = nullptr;            // cudaStream_t for CUDA tensors
  int num_threads = 0;               // CPU: 0 uses every hardware thread
};

Status merge_partials(const MergeParams& params);

}  // namespace flashcore
