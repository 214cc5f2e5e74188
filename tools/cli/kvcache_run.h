// `flashcore run --kvcache`: forward_kvcache on seeded random data, timed and optionally checked
// (kvcache_run.cpp says how).
#pragma once

#include "options.h"

namespace flashcore::cli {

// Runs on CUDA when `on_cuda`, else on the CPU backend; returns the CLI's exit code.
int kvcache_run(const Options& options, bool on_cuda);

}  // namespace flashcore::cli
