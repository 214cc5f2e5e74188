// Drives an Executor the same way for every implementation: warm-up passes, timed passes, then
// (with --check) one pass on NaN-poisoned outputs whose results are read back.
#pragma once

#include <optional>
#include <vector>

#include "runner.h"

namespace flashcore::cli {

struct RunPlan {
  bool backward = false;
  int warmup = 0;
  int repeats = 0;  // 0: no timed pass; one untimed pass still runs
  bool read_outputs = false;
};

struct RunRecord {
  std::vector<double> forward_ms;  // one per timed pass
  std::vector<double> total_ms;    // forward + backward when backward, else the forward again
  std::optional<HostOutputs> outputs;
  MemoryUse memory;
};

Status run_loop(Executor& executor, const RunPlan& plan, RunRecord* record);

}  // namespace flashcore::cli
