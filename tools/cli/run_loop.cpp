// The warm-up, timing and checked passes of one run.
#include "run_loop.h"


namespace flashcore::cli {
namespace {

Status untimed_pass(Executor& executor, bool backward) {
  FLASHCORE_RETURN_IF_ERROR(executor.forward());
  if (backward) FLASHCORE_RETURN_IF_ERROR(executor.backward());
  return executor.synchronize();
}

}  // namespace

Status run_loop(Executor& executor, const RunPlan& plan, RunRecord* record) {
  for (int i = 0; i < plan.warmup; ++i) FLASHCORE_RETURN_IF_ERROR(untimed_pass(executor, plan.backward));

  for (int i = 0; i < plan.repeats; ++i) {
    FLASHCORE_RETURN_IF_ERROR(executor.begin_pass());
    FLASHCORE_RETURN_IF_ERROR(executor.forward());
    FLASHCORE_RETURN_IF_ERROR(executor.end_forward());
    if (plan.backward) FLASHCORE_RETURN_IF_ERROR(executor.backward());
    double forward_ms = 0.0;
    double total_ms = 0.0;
    FLASHCORE_RETURN_IF_ERROR(executor.end_pass(&forward_ms, &total_ms));
    record->forward_ms.push_back(forward_ms);
    record->total_ms.push_back(total_ms);
  }

  if (plan.read_outputs || plan.repeats == 0) {
    FLASHCORE_RETURN_IF_ERROR(executor.poison_outputs());
    FLASHCORE_RETURN_IF_ERROR(untimed_pass(executor, plan.backward));
    if (plan.read_outputs) {
      HostOutputs outputs;
      FLASHCORE_RETURN_IF_ERROR(executor.read_outputs(&outputs));
      record->outputs = std::move(outputs);
    }
  }
  record->memory = executor.memory_use();
  return Status::Ok();
}

}  // namespace flashcore::cli
