// A minimal fork-join loop for the CPU backends: tasks handed out one at a time from a shared
// counter, so uneven tasks (causal query blocks near the diagonal are short) balance themselves.
// The workers are the process's thread pool (thread_pool.h), created once and reused.
//
// Workers are numbered so a caller can give each one its own scratch, allocated before the loop:
// the body must not allocate or throw, because an exception escaping a worker terminates.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

#include "cpu/thread_pool.h"

namespace flashcore::cpu {

// How many workers to use for `num_tasks` tasks when the caller asked for `requested` threads
// (0: every hardware thread). Never more workers than tasks, never fewer than one.
inline int worker_count(int requested, std::int64_t num_tasks) {
  std::int64_t workers = requested > 0 ? requested : static_cast<std::int64_t>(std::thread::hardware_concurrency());
  workers = std::min<std::int64_t>(workers, num_tasks);
  return static_cast<int>(std::max<std::int64_t>(workers, 1));
}

// Runs body(task, worker) for every task in [0, num_tasks), on `workers` threads counting the
// caller's (worker 0). When the pool is busy (another thread's call, or a parallel_for inside a
// body) the workers are threads started for this call; if the system refuses a thread, the
// workers already running finish the remaining tasks: fewer threads, same result.
template <typename Body>
void parallel_for(std::int64_t num_tasks, int workers, const Body& body) {
  struct Job {
    std::atomic<std::int64_t> next{0};
    std::int64_t num_tasks;
    const Body* body;
    static void drain(void* context, int worker) {
      Job& job = *static_cast<Job*>(context);
      for (std::int64_t task = job.next.fetch_add(1); task < job.num_tasks; task = job.next.fetch_add(1))
        (*job.body)(task, worker);
    }
  };
  Job job;
  job.num_tasks = num_tasks;
  job.body = &body;
  if (run_on_pool(workers, &Job::drain, &job) > 0) return;

  std::vector<std::thread> threads;
  try {
    threads.reserve(static_cast<std::size_t>(workers > 1 ? workers - 1 : 0));
    for (int w = 1; w < workers; ++w) threads.emplace_back(&Job::drain, &job, w);
  } catch (const std::exception&) {
    // std::system_error (no more threads) or std::bad_alloc: run with the workers we have.
  }
  Job::drain(&job, 0);
  for (std::thread& t : threads) t.join();
}

}  // namespace flashcore::cpu
