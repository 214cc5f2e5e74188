// A fork-join pool: one job at a time, workers sleep on a condition variable between jobs.
#include "cpu/thread_pool.h"

#include "cpu/openmp_runtime.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace flashcore::cpu {
namespace {

class ThreadPool {
 public:
  int run(int workers, void (*fn)(void*, int), void* context) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return 0;
    grow(workers - 1);
    std::unique_lock<std::mutex> lock(mutex_);
    const int helpers = std::min<int>(workers - 1, static_cast<int>(threads_.size()));
    fn_ = fn;
    context_ = context;
    job_helpers_ = helpers;
    remaining_ = helpers;
    ++generation_;
    lock.unlock();
    start_.notify_all();
    fn(context, 0);
    lock.lock();
    done_.wait(lock, [&] { return remaining_ == 0; });
    return helpers + 1;
  }

 private:
  // Adds threads until there are `helpers`; stops early if the system refuses one.
  void grow(int helpers) {
    while (static_cast<int>(threads_.size()) < helpers) {
      try {
        const int index = static_cast<int>(threads_.size()) + 1;
        std::thread t([this, index, seen = generation_] { loop(index, seen); });
        t.detach();  // the pool lives until the process ends; see pool() below
        threads_.push_back(index);
      } catch (const std::exception&) {
        return;  // std::system_error (no more threads) or std::bad_alloc: run with those we have
      }
    }
  }

  // `seen`: the generation before the first job this thread is to run (grow() runs before run()
  // starts that job, so a thread that starts late still takes part in it).
  void loop(int index, std::uint64_t seen) {
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (index > job_helpers_) continue;
      void (*fn)(void*, int) = fn_;
      void* context = context_;
      lock.unlock();
      fn(context, index);
      lock.lock();
      if (--remaining_ == 0) done_.notify_one();
    }
  }

  std::mutex busy_;  // held for a whole job: one job at a time
  std::mutex mutex_;
  std::condition_variable start_;
  std::condition_variable done_;
  std::vector<int> threads_;  // indices of the threads started (they are detached)
  std::uint64_t generation_ = 0;
  int job_helpers_ = 0;
  int remaining_ = 0;
  void (*fn_)(void*, int) = nullptr;
  void* context_ = nullptr;
};

// One pool per process, never destroyed: its threads may still be waiting when static destructors
// run at exit. A child of fork() has none of its parent's threads, so it starts a pool of its own.
ThreadPool& pool() {
  static std::mutex mutex;
  static ThreadPool* instance = nullptr;
  static pid_t owner = 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (instance == nullptr || owner != getpid()) {
    instance = new ThreadPool;  // a forked child's inherited one is abandoned, not freed
    owner = getpid();
  }
  return *instance;
}

}  // namespace

int run_on_pool(int workers, void (*fn)(void* context, int worker), void* context) {
  if (workers <= 1) {
    fn(context, 0);
    return 1;
  }
  if (const int team = run_on_openmp(workers, fn, context); team > 0) return team;
  return pool().run(workers, fn, context);
}

}  // namespace flashcore::cpu
