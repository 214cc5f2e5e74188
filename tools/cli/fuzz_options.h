// The command line of `flashcore fuzz`.
#pragma once

#include <cstdint>
#include <string>

#include "flashcore/attention.h"
#include "options.h"

namespace flashcore::cli {

struct FuzzOptions {
  DeviceChoice device = DeviceChoice::kAuto;
  KernelFamily kernels = KernelFamily::kAuto;
  std::int64_t count = 200;
  std::uint64_t seed = 1;
  std::int64_t max_seqlen = 4096;
  std::int64_t max_elements = 0;  // 0: the device's default (default_max_elements)
  int threads = 0;  // per call of the library and the reference; 0: every hardware thread
  int jobs = 0;     // problems checked at once, each on one thread; 0: one per hardware thread
  bool json = false;
  bool shrink = true;
  bool score_options = true;  // --no-score-options: draw no window, softcap or ALiBi
  bool varlen = true;         // --no-varlen: draw no variable-length batches
  std::string problem;  // --problem SPEC: run this one problem instead of drawing
};

// The cap on batch * heads * seqlen_q * seqlen_k per problem when --max-elements is not given: the
// float64 reference and the baseline run on the host and dominate the time, so the CPU default
// keeps a few hundred problems well under a minute on two cores; CUDA's lets long seqlens through.
std::int64_t default_max_elements(bool on_cuda);

// argv[0] is "fuzz". Returns false with a one-line *error; *help for -h/--help.
bool parse_fuzz_options(int argc, const char* const* argv, FuzzOptions* options, bool* help, std::string* error);

std::string fuzz_usage();

}  // namespace flashcore::cli
