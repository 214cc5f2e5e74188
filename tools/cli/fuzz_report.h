// What `flashcore fuzz` prints: the text report (failures as they are found, then a summary) or one
// JSON object.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fuzz_problem.h"

namespace flashcore::cli {

struct FuzzFailure {
  std::int64_t index = -1;  // the problem's number in the run; -1 for --problem
  std::uint64_t problem_seed = 0;
  FuzzProblem drawn;
  FuzzProblem shrunk;  // the smallest variant found that still fails (== drawn without shrinking)
  std::string message;  // why the shrunk problem fails
};

// How many drawn problems had each property, to show what a run covered.
struct FuzzCoverage {
  std::map<std::string, std::int64_t> counts;
  void add(const FuzzProblem& problem);
};

struct FuzzSummary {
  std::string device;    // cpu or cuda
  std::string hardware;  // "2 threads" or the GPU's name
  std::string kernels;   // auto, sm80, sm90 (CUDA)
  std::uint64_t seed = 0;
  std::int64_t count = 0;
  std::int64_t max_seqlen = 0;
  std::int64_t max_elements = 0;
  std::int64_t passed = 0;
  std::int64_t failed = 0;
  std::int64_t skipped = 0;
  std::map<std::string, std::int64_t> skip_reasons;  // message with numbers as N -> count
  FuzzCoverage coverage;
  double seconds = 0.0;
  std::vector<FuzzFailure> failures;
};

// The lines that reproduce a failure: `flashcore fuzz --problem ...` (exact: layouts, inputs and
// rule), and `flashcore run ...` (same shape, dtype and input values; contiguous tensors and run's
// own fixed bound).
std::string fuzz_reproduce_line(const FuzzSummary& summary, const FuzzProblem& problem);
std::string run_reproduce_line(const FuzzSummary& summary, const FuzzProblem& problem);

// Skip messages grouped: digits replaced by N, so "head_dim 40" and "head_dim 52" count together.
std::string skip_reason_key(const std::string& message);

void print_failure_text(const FuzzSummary& summary, const FuzzFailure& failure);
void print_summary_text(const FuzzSummary& summary);
void print_summary_json(const FuzzSummary& summary);

}  // namespace flashcore::cli
