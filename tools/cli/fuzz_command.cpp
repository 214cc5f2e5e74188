// `flashcore fuzz`: draw, check, shrink, report.
#include "fuzz_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <atomic>
#include <thread>
#include <vector>

#include "flashcore/flashcore.h"
#include "fuzz_check.h"
#include "fuzz_options.h"
#include "fuzz_report.h"
#include "run_command.h"
#include "runner.h"

namespace flashcore::cli {
namespace {

// Tries to shrink a failure: each smaller variant that still fails replaces it, until none does or
// the budget of reruns is spent (big problems are slow to rerun on the host reference).
FuzzFailure shrink(FuzzFailure failure, const FuzzTarget& target) {
  constexpr int kMaxReruns = 64;
  int reruns = 0;
  bool smaller_found = true;
  while (smaller_found && reruns < kMaxReruns) {
    smaller_found = false;
    for (const FuzzProblem& candidate : smaller_problems(failure.shrunk)) {
      if (++reruns > kMaxReruns) break;
      const ProblemResult result = check_problem(candidate, target);
      if (result.verdict == Verdict::kFailed) {
        failure.shrunk = candidate;
        failure.message = result.message;
        smaller_found = true;
        break;
      }
    }
  }
  return failure;
}

// Where the problems run; "" or a message saying why they cannot.
std::string open_device(const FuzzOptions& o, std::unique_ptr<FuzzMemory>* memory, FuzzSummary* summary) {
  const bool on_cuda = o.device == DeviceChoice::kCuda ||
                       (o.device == DeviceChoice::kAuto && built_with_cuda() && cuda_device_present());
  if (!on_cuda) {
    *memory = make_host_memory();
    summary->device = "cpu";
    const unsigned threads = o.threads > 0 ? static_cast<unsigned>(o.threads) : std::thread::hardware_concurrency();
    summary->hardware = std::to_string(threads) + (threads == 1 ? " thread" : " threads");
    return "";
  }
  if (!built_with_cuda()) return "--device cuda: this flashcore was built without CUDA (no nvcc at configure time)";
  if (!cuda_device_present()) return "--device cuda: no CUDA device is present";
  const Status status = make_cuda_memory(memory);
  if (!status.ok()) return status.message();
  summary->device = "cuda";
  summary->hardware = cuda_device_name();
  return "";
}

// How many problems run at once: --jobs, 0 meaning one per hardware thread, never more than there
// are problems.
int job_count(int requested, std::int64_t count) {
  const std::int64_t jobs = requested > 0 ? requested : std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::max<std::int64_t>(1, std::min(jobs, count)));
}

// Calls body(i) for every i in [0, count) on `jobs` threads, handing out indices one at a time so
// slow problems do not hold the others up. body must not throw.
template <typename Body>
void run_jobs(std::int64_t count, int jobs, const Body& body) {
  std::atomic<std::int64_t> next{0};
  const auto drain = [&] {
    for (std::int64_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) body(i);
  };
  std::vector<std::thread> threads;
  try {
    for (int j = 1; j < jobs; ++j) threads.emplace_back(drain);
  } catch (const std::exception&) {
    // No more threads (std::system_error) or memory: the ones running, this one included, finish.
  }
  drain();
  for (std::thread& t : threads) t.join();
}

const char* kernels_name(KernelFamily kernels) {
  switch (kernels) {
    case KernelFamily::kAuto: return "auto";
    case KernelFamily::kSm80: return "sm80";
    case KernelFamily::kSm90: return "sm90";
  }
  return "auto";
}

void record(const FuzzProblem& problem, const ProblemResult& result, FuzzSummary* summary) {
  summary->coverage.add(problem);
  switch (result.verdict) {
    case Verdict::kPassed: ++summary->passed; break;
    case Verdict::kFailed: ++summary->failed; break;
    case Verdict::kSkipped:
      ++summary->skipped;
      ++summary->skip_reasons[skip_reason_key(result.message)];
      break;
  }
}

}  // namespace

int fuzz_command(int argc, const char* const* argv) {
  FuzzOptions o;
  bool help = false;
  std::string error;
  if (!parse_fuzz_options(argc, argv, &o, &help, &error)) {
    std::fprintf(stderr, "flashcore fuzz: %s\n%s", error.c_str(), fuzz_usage().c_str());
    return kExitUsage;
  }
  if (help) {
    std::printf("%s", fuzz_usage().c_str());
    return kExitOk;
  }
  FuzzProblem single;
  if (!o.problem.empty()) {
    if (const std::string bad = parse_problem_spec(o.problem, &single); !bad.empty()) {
      std::fprintf(stderr, "flashcore fuzz: %s\n%s", bad.c_str(), fuzz_usage().c_str());
      return kExitUsage;
    }
  }

  FuzzSummary summary;
  std::unique_ptr<FuzzMemory> memory;
  if (const std::string unavailable = open_device(o, &memory, &summary); !unavailable.empty()) {
    std::fprintf(stderr, "flashcore fuzz: %s\n", unavailable.c_str());
    return kExitFailed;
  }
  const bool on_cuda = summary.device == "cuda";
  summary.kernels = kernels_name(o.kernels);
  summary.seed = o.seed;
  summary.count = o.problem.empty() ? o.count : 1;
  summary.max_seqlen = o.max_seqlen;
  summary.max_elements = o.max_elements > 0 ? o.max_elements : default_max_elements(on_cuda);
  const FuzzTarget target{memory.get(), o.kernels, o.threads};
  const FuzzLimits limits{summary.max_seqlen, summary.max_elements, o.score_options, o.varlen};

  // Problems run side by side, one thread each: most are small, and the host-side float64
  // reference and baseline, not the library, set the pace. Results are kept by index, so the
  // report is the same whatever the number of jobs.
  const auto start = std::chrono::steady_clock::now();
  std::vector<FuzzProblem> problems(static_cast<std::size_t>(summary.count));
  std::vector<ProblemResult> results(problems.size());
  const int jobs = job_count(o.jobs, summary.count);
  FuzzTarget job_target = target;
  if (jobs > 1) job_target.threads = 1;
  run_jobs(summary.count, jobs, [&](std::int64_t i) {
    const std::size_t at = static_cast<std::size_t>(i);
    problems[at] = o.problem.empty() ? draw_problem(problem_seed(o.seed, i), limits) : single;
    results[at] = check_problem(problems[at], job_target);
  });
  for (std::size_t i = 0; i < problems.size(); ++i) {
    record(problems[i], results[i], &summary);
    if (results[i].verdict != Verdict::kFailed) continue;
    FuzzFailure failure;
    failure.index = o.problem.empty() ? static_cast<std::int64_t>(i) : -1;
    failure.problem_seed = o.problem.empty() ? problem_seed(o.seed, static_cast<std::int64_t>(i)) : 0;
    failure.drawn = problems[i];
    failure.shrunk = problems[i];
    failure.message = results[i].message;
    if (o.shrink && !results[i].device_error) failure = shrink(failure, target);
    if (!o.json) print_failure_text(summary, failure);
    summary.failures.push_back(failure);
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto first_device_error = std::find_if(results.begin(), results.end(),
                                               [](const ProblemResult& r) { return r.device_error; });
  if (first_device_error != results.end()) {
    // Problems ran side by side, so "first" is by index: rerun it alone with --problem to confirm.
    std::fprintf(stderr,
                 "flashcore fuzz: the CUDA runtime reported an error (first at problem %lld): later results "
                 "on this device cannot be trusted; rerun that problem alone with --problem, then continue\n",
                 static_cast<long long>(first_device_error - results.begin()));
  }

  if (o.json) {
    print_summary_json(summary);
  } else {
    if (!o.problem.empty() && summary.skipped > 0) {
      std::printf("skipped: %s\n", summary.skip_reasons.begin()->first.c_str());
    }
    print_summary_text(summary);
  }
  return summary.failed == 0 ? kExitOk : kExitFailed;
}

}  // namespace flashcore::cli
