// What a run found, and its two renderings: the text report and --json's single object.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "check.h"
#include "host_data.h"

namespace flashcore::cli {

struct Report {
  std::string impl;
  std::string device;    // "cpu" or "cuda"
  std::string hardware;  // e.g. "8 threads" or the GPU's name
  // The GPU kernel family each pass ran (flashcore on CUDA only; empty otherwise).
  std::string kernels_forward;
  std::string kernels_backward;
  DType element = DType::kFloat16;      // what the implementation computed in
  DType input_dtype = DType::kFloat16;  // what the inputs were rounded to (--dtype)
  Shape shape;
  bool backward = false;
  bool deterministic = false;
  int repeats = 0;
  int warmup = 0;
  // Medians and p90 of the timed passes; empty when nothing was timed (--repeats 0).
  std::optional<double> ms;  // the whole pass: forward, or forward + backward
  std::optional<double> ms_p90;
  std::optional<double> ms_forward;
  std::optional<double> ms_backward;  // median of (pass - forward) with --backward
  std::optional<std::size_t> extra_memory_bytes;
  std::string extra_memory_how;
  double standard_attention_bytes = 0;  // double: B * H * Sq * Sk can pass 2^64 at absurd shapes
  std::optional<CheckResult> check;
};

// Bytes standard attention materialises: the (B, H, Sq, Sk) scores S and probabilities P in the
// element type.
double standard_attention_bytes(const Shape& shape, DType element);

void print_text(const Report& report);
void print_json(const Report& report);

}  // namespace flashcore::cli
