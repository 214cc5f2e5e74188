// Borrowing the worker threads of an OpenMP runtime that the process has already loaded (PyTorch's
// libgomp, say) instead of running flashcore's own pool.
//
// Why: PyTorch's CPU ops run on an OpenMP team whose threads, by OpenMP's default wait policy, spin
// for a while after each op. A flashcore call that follows a torch op on its own pool then finds
// one of its cores taken by a spinning thread (docs/tuning/cpu.md, v9 and v10). Run on that same
// team, flashcore's work is what the spinning threads pick up, and the process never has more
// runnable threads than the thread count PyTorch was given.
#pragma once

#include <string>

namespace flashcore::cpu {

// Binds to the OpenMP runtime at `library_path`, which must already be loaded in this process
// (nothing new is loaded), through the GNU OpenMP entry points GOMP_parallel and
// omp_get_thread_num (libgomp; LLVM's libomp and Intel's libiomp5 export them too). Null or "" goes
// back to flashcore's own pool. On failure returns false with the reason in *error and leaves the
// current choice as it was.
bool use_openmp_runtime(const char* library_path, std::string* error);

// Runs fn(context, w) on a team of at most `workers` threads of the bound runtime, w being the
// thread's number in the team (0 = the caller), and returns the team's size; returns 0 without
// running anything when no runtime is bound.
int run_on_openmp(int workers, void (*fn)(void* context, int worker), void* context);

}  // namespace flashcore::cpu
