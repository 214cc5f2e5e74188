// `flashcore run`: choose where and what runs, drive it through run_loop, check, report.
#include "run_command.h"

#include <cstdio>
#include <new>
#include <string>
#include <thread>

#include "check.h"
#include "kvcache_run.h"
#include "flashcore/flashcore.h"
#include "report.h"
#include "run_loop.h"
#include "runner.h"
#include "stats.h"

namespace flashcore::cli {
namespace {

bool is_ladder_rung(const std::string& impl) {
  for (const std::string& name : ladder_rung_names()) {
    if (name == impl) return true;
  }
  return false;
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "flashcore: %s\n%s", message.c_str(), usage().c_str());
  return kExitUsage;
}

int failure(const std::string& message) {
  std::fprintf(stderr, "flashcore: %s\n", message.c_str());
  return kExitFailed;
}

Shape shape_of(const Options& o) {
  Shape s;
  s.batch = o.batch;
  s.seqlen_q = o.seqlen_q;
  s.seqlen_k = o.seqlen_k;
  s.heads_q = o.heads_q;
  s.heads_kv = o.heads_kv;
  s.head_dim = o.head_dim;
  s.causal = o.causal;
  s.window_left = o.window_left;
  s.window_right = o.window_right;
  s.softcap = o.softcap;
  s.alibi = o.alibi;
  s.dropout_p = o.dropout_p;
  s.dropout_seed = o.seed;
  s.lengths_q = o.lengths_q;
  s.lengths_k = o.lengths_k;
  return s;
}

// Where the run goes: --device, except that auto means CUDA only when this build has it and a
// GPU is present, and the float64 reference always runs on the CPU.
// Returns "" and sets *on_cuda, or a usage error.
std::string choose_device(const Options& o, bool* on_cuda) {
  const bool reference = o.impl == "reference";
  const bool rung = is_ladder_rung(o.impl);
  if (o.device == DeviceChoice::kCpu && rung) return "--impl " + o.impl + " runs on CUDA only";
  if (o.device == DeviceChoice::kCuda && reference) return "--impl reference runs on the CPU only";
  switch (o.device) {
    case DeviceChoice::kCpu: *on_cuda = false; break;
    case DeviceChoice::kCuda: *on_cuda = true; break;
    case DeviceChoice::kAuto: *on_cuda = rung || (!reference && built_with_cuda() && cuda_device_present()); break;
  }
  return "";
}

Status make_executor(const Options& o, bool on_cuda, const Job& job, std::unique_ptr<Executor>* executor,
                     DType* element) {
  if (is_ladder_rung(o.impl)) return make_ladder_executor(o.impl, job, executor, element);
  if (on_cuda) return make_cuda_executor(job, executor);
  return make_cpu_executor(o.impl, job, executor);
}

// Medians and p90 of the timed passes into the report; the backward's own time per pass is the
// pass minus its forward.
void summarize_timings(const RunRecord& record, bool backward, Report* report) {
  if (record.total_ms.empty()) return;
  report->ms = quantile(record.total_ms, 0.5);
  report->ms_p90 = quantile(record.total_ms, 0.9);
  report->ms_forward = quantile(record.forward_ms, 0.5);
  if (backward) {
    std::vector<double> backward_ms;
    for (std::size_t i = 0; i < record.total_ms.size(); ++i) {
      backward_ms.push_back(record.total_ms[i] - record.forward_ms[i]);
    }
    report->ms_backward = quantile(backward_ms, 0.5);
  }
}

// Runs, checks and fills the rest of the report; a failed Status is a library error.
Status run_and_check(const Options& o, bool on_cuda, Report* report) {
  const HostInputs inputs = make_inputs(report->shape, o.dtype, o.backward, o.seed);
  Job job;
  job.shape = report->shape;
  job.dtype = o.dtype;
  job.backward = o.backward;
  job.deterministic = o.deterministic;
  job.kernels = o.kernels;
  job.threads = o.threads;
  job.inputs = &inputs;
  std::unique_ptr<Executor> executor;
  FLASHCORE_RETURN_IF_ERROR(make_executor(o, on_cuda, job, &executor, &report->element));

  RunPlan plan;
  plan.backward = o.backward;
  plan.warmup = report->warmup;
  plan.repeats = report->repeats;
  plan.read_outputs = o.check;
  RunRecord record;
  FLASHCORE_RETURN_IF_ERROR(run_loop(*executor, plan, &record));
  report->kernels_forward = executor->kernels(false);
  if (o.backward) report->kernels_backward = executor->kernels(true);

  summarize_timings(record, o.backward, report);
  report->extra_memory_bytes = record.memory.extra_bytes;
  report->extra_memory_how = record.memory.how;
  report->standard_attention_bytes = standard_attention_bytes(report->shape, report->element);
  if (record.outputs) {
    HostOutputs reference;
    FLASHCORE_RETURN_IF_ERROR(reference_outputs(report->shape, inputs, o.threads, &reference));
    report->check = check_outputs(*record.outputs, reference, report->element);
  }
  return Status::Ok();
}

}  // namespace

std::vector<std::string> impl_names() {
  std::vector<std::string> names = {"flashcore", "reference"};
  for (const std::string& rung : ladder_rung_names()) names.push_back(rung);
  return names;
}

int run_command(const Options& o) {
  if (o.impl != "flashcore" && o.impl != "reference" && !is_ladder_rung(o.impl)) {
    std::string names;
    for (const std::string& name : impl_names()) names += (names.empty() ? "" : ", ") + name;
    return usage_error("--impl: unknown implementation '" + o.impl + "' (available: " + names + ")");
  }
  bool on_cuda = false;
  if (const std::string error = choose_device(o, &on_cuda); !error.empty()) return usage_error(error);
  const Shape shape = shape_of(o);
  if (is_ladder_rung(o.impl)) {
    if (o.deterministic) return usage_error("--deterministic: the teaching-ladder rungs have no deterministic mode");
    if (shape.has_score_options() || shape.varlen()) {
      return usage_error(
          "--window, --softcap, --alibi, --dropout, --varlen: the teaching-ladder rungs have none of these options");
    }
    if (const std::string error = ladder_request_error(o.impl, shape, o.dtype, o.backward); !error.empty()) {
      return usage_error(error);
    }
  }
  if (o.kernels != KernelFamily::kAuto && (!on_cuda || o.impl != "flashcore")) {
    return usage_error("--kernels: picks flashcore's GPU kernels; it needs --impl flashcore on --device cuda");
  }
  if (on_cuda && !built_with_cuda()) return failure("--device cuda: this flashcore was built without CUDA");
  if (on_cuda && !cuda_device_present()) return failure("--device cuda: no CUDA device is present");
  if (o.kvcache) {
    if (o.impl != "flashcore") return usage_error("--kvcache: runs --impl flashcore only");
    if (o.dropout_p > 0.0) return usage_error("--dropout: forward_kvcache has no dropout (inference)");
    return kvcache_run(o, on_cuda);
  }

  Report report;
  report.impl = o.impl;
  report.device = on_cuda ? "cuda" : "cpu";
  report.shape = shape;
  report.backward = o.backward;
  report.deterministic = o.deterministic;
  report.element = o.dtype;
  report.input_dtype = o.dtype;
  report.repeats = o.repeats >= 0 ? o.repeats : default_repeats(on_cuda);
  report.warmup = o.warmup >= 0 ? o.warmup : default_warmup(on_cuda);
  if (on_cuda) {
    report.hardware = cuda_device_name();
  } else {
    const unsigned threads = o.threads > 0 ? static_cast<unsigned>(o.threads) : std::thread::hardware_concurrency();
    report.hardware = std::to_string(threads) + (threads == 1 ? " thread" : " threads");
  }

  try {
    const Status status = run_and_check(o, on_cuda, &report);
    if (!status.ok()) return failure(status.message());
  } catch (const std::bad_alloc&) {
    return failure("out of host memory for this shape");
  }

  if (o.json) {
    print_json(report);
  } else {
    print_text(report);
  }
  return report.check && !report.check->passed ? kExitFailed : kExitOk;
}

}  // namespace flashcore::cli
