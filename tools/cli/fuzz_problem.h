// `flashcore fuzz`'s problems: one attention call (shape, dtype, causal, forward or backward, the
// memory layout of its tensors and the seed of its inputs), drawn at random from a seed, written
// out as a spec string that `flashcore fuzz --problem` reads back, and made smaller for a report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashcore/tensor.h"
#include "host_data.h"

namespace flashcore::cli {

// How a (batch, seqlen, heads, head_dim) tensor sits in memory. head_dim is always contiguous.
enum class LayoutKind {
  kContiguous,  // row-major (batch, seqlen, heads, head_dim)
  kPadded,      // row-major, every stride padded by `pad` elements (gaps between rows and heads)
  kHeadsMajor,  // (batch, heads, seqlen, head_dim + pad) in memory, viewed as (batch, seqlen, heads, ..):
                // non-contiguous batch, seqlen and head strides, as a transposed tensor has
};

struct TensorLayout {
  LayoutKind kind = LayoutKind::kContiguous;
  std::int64_t pad = 0;  // elements; kContiguous has none
};

struct FuzzProblem {
  Shape shape;  // causal included
  DType dtype = DType::kFloat16;
  bool backward = false;
  bool deterministic = false;  // backward only: BackwardParams::deterministic, checked run to run
  TensorLayout inputs;   // q, k, v, dout
  TensorLayout outputs;  // out, dq, dk, dv (the LSE is contiguous)
  std::uint64_t input_seed = 0;  // make_inputs(): the same numbers `flashcore run --seed` draws
};

struct FuzzLimits {
  std::int64_t max_seqlen = 4096;
  // Cap on batch * heads_q * seqlen_q * seqlen_k, the score-matrix entries the float64 reference
  // and the same-precision baseline compute (each costing about head_dim multiply-adds a product).
  std::int64_t max_elements = 0;
  // false: no window, softcap, ALiBi or dropout (for a family that serves none of them, so its problems are
  // not skipped); every other field is drawn as with them.
  bool score_options = true;
  // false: no varlen batches (cu_seqlens); true draws one problem in five as one.
  bool varlen = true;
};

// The seed of problem `index` of a run seeded `seed`: problems are independent, so one can be drawn
// again without the ones before it.
std::uint64_t problem_seed(std::uint64_t seed, std::int64_t index);

// A random problem, biased toward what breaks kernels: small and ragged seqlens (tile edges,
// seqlen 1), seqlen_q != seqlen_k both ways, GQA and MQA, head dims off the usual list, strided
// views (odd paddings too, whose rows are not 16-byte aligned). The same seed and limits give the
// same problem on every device.
FuzzProblem draw_problem(std::uint64_t seed, const FuzzLimits& limits);

// batch * heads_q * seqlen_q * seqlen_k.
std::int64_t score_elements(const Shape& shape);

// "batch=2,seqlen_q=17,...": every field, for --problem.
std::string problem_spec(const FuzzProblem& problem);
// The inverse of problem_spec. Returns "" or a message naming the bad field.
std::string parse_problem_spec(const std::string& spec, FuzzProblem* problem);

// A one-line description for people: "b2 sq17 sk33 hq4 hkv2 d40 bf16 causal fwd+bwd in=padded+3 ...".
std::string describe(const FuzzProblem& problem);

// The `flashcore run` flags for the same shape, dtype and input seed (contiguous tensors: run has no
// layout flags).
std::string run_flags(const FuzzProblem& problem);

// Smaller variants of `problem` (each field halved or simplified in turn), to try in order while
// shrinking a failure.
std::vector<FuzzProblem> smaller_problems(const FuzzProblem& problem);

// The (batch, seqlen, heads, head_dim) strides of `layout`, and the elements its storage spans.
void layout_strides(const TensorLayout& layout, std::int64_t batch, std::int64_t seqlen, std::int64_t heads,
                    std::int64_t head_dim, std::int64_t strides[4], std::int64_t* storage_elements);

}  // namespace flashcore::cli
