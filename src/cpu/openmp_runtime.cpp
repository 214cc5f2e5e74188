// The bound runtime is a pair of function pointers looked up once with dlsym; a call reads it with
// one atomic load. Runtimes are never unbound from memory: a call may still be running on one when
// another thread rebinds, and a dlopen handle with RTLD_NOLOAD costs nothing to keep.
#include "cpu/openmp_runtime.h"

#include <dlfcn.h>

#include <atomic>

namespace flashcore::cpu {
namespace {

struct OpenMpRuntime {
  // GOMP_parallel(fn, data, num_threads, flags): the call GCC emits for `#pragma omp parallel`;
  // num_threads is an upper bound on the team (0 would mean the runtime's default), flags 0.
  void (*parallel)(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags);
  int (*thread_num)();
};

std::atomic<const OpenMpRuntime*> bound{nullptr};

struct Region {
  void (*fn)(void*, int);
  void* context;
  int (*thread_num)();
  std::atomic<int> team{0};
};

void run_region(void* data) {
  Region& region = *static_cast<Region*>(data);
  region.team.fetch_add(1, std::memory_order_relaxed);
  region.fn(region.context, region.thread_num());
}

}  // namespace

bool use_openmp_runtime(const char* library_path, std::string* error) {
  if (library_path == nullptr || library_path[0] == '\0') {
    bound.store(nullptr);
    return true;
  }
  void* handle = dlopen(library_path, RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) {
    *error = std::string("is not a library loaded in this process (") + library_path + ")";
    return false;
  }
  auto* parallel = reinterpret_cast<decltype(OpenMpRuntime::parallel)>(dlsym(handle, "GOMP_parallel"));
  auto* thread_num = reinterpret_cast<decltype(OpenMpRuntime::thread_num)>(dlsym(handle, "omp_get_thread_num"));
  if (parallel == nullptr || thread_num == nullptr) {
    *error = std::string("has no GOMP_parallel / omp_get_thread_num, so it is not an OpenMP runtime (") +
             library_path + ")";
    return false;
  }
  bound.store(new OpenMpRuntime{parallel, thread_num});  // kept for good: see the file comment
  return true;
}

int run_on_openmp(int workers, void (*fn)(void* context, int worker), void* context) {
  const OpenMpRuntime* runtime = bound.load();
  if (runtime == nullptr) return 0;
  Region region{fn, context, runtime->thread_num};
  runtime->parallel(&run_region, &region, static_cast<unsigned>(workers), 0);
  return region.team.load();
}

}  // namespace flashcore::cpu
