// --varlen: the sequences of a packed batch (attention.h, "varlen"), their offsets, and each one
// seen as a dense problem of batch 1, which is how the float64 reference and the same-precision
// baseline check a varlen call: sequence by sequence, their results packed back into the layout.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flashcore/reference.h"
#include "host_data.h"

namespace flashcore::cli {

// Where sequence `index` sits in the packed tensors.
struct Sequence {
  std::int64_t index = 0;
  std::int64_t q_row = 0;  // first row of q, out, dout, dq (and LSE column)
  std::int64_t k_row = 0;  // first row of k, v, dk, dv
  std::int64_t len_q = 0;
  std::int64_t len_k = 0;
};

std::vector<Sequence> sequences(const Shape& shape);

// cu_seqlens: 0, then the running sums of `lengths` (int32 values, widened to double for encode()).
std::vector<double> cu_seqlens(const std::vector<std::int64_t>& lengths);

// Parses --varlen: "random" or a list of per-sequence lengths, each N (queries = keys) or Q:K,
// separated by commas ("100,37:60,0"). Sets lengths_q / lengths_k; returns "" or the error.
std::string parse_varlen_list(std::string_view value, std::vector<std::int64_t>* lengths_q,
                              std::vector<std::int64_t>* lengths_k);

// `batch` lengths uniform in [1, max_q] and [1, max_k], from `seed` (the same on every platform).
void draw_random_lengths(std::int64_t batch, std::int64_t max_q, std::int64_t max_k, std::uint64_t seed,
                         std::vector<std::int64_t>* lengths_q, std::vector<std::int64_t>* lengths_k);

// The whole call's reference problem (dense layout: as given; varlen: batch and lengths are
// replaced per sequence by sequence_problem).
ReferenceProblem reference_problem(const Shape& shape, const HostInputs& inputs, float softmax_scale);

// Sequence `seq` alone: batch 1, its lengths, its ALiBi slopes, its place in the dropout stream.
ReferenceProblem sequence_problem(const ReferenceProblem& whole, const Sequence& seq, const HostInputs& inputs);

// Rows [row0, row0 + rows) of a packed (total, width) array, and the inverse.
std::vector<double> take_rows(const std::vector<double>& packed, std::int64_t row0, std::int64_t rows,
                              std::int64_t width);
void put_rows(const std::vector<double>& rows, std::int64_t row0, std::int64_t width, std::vector<double>* packed);
// A sequence's (1, heads, len_q) LSE into the packed (heads, total_q) one.
void put_lse(const std::vector<double>& lse, const Sequence& seq, std::int64_t heads, std::int64_t total_q,
             std::vector<double>* packed);

// Describes the lengths for a report: "3 sequences, q 100/37/0, k 100/60/0".
std::string describe_lengths(const Shape& shape);

}  // namespace flashcore::cli
