// The CPU backends' worker threads: created on first use, kept for the life of the process and
// reused by every call, so a call pays no thread start-up. The pool grows to the largest worker
// count asked for and never beyond it (callers pass the API's num_threads, which the Python
// binding sets to torch.get_num_threads(): no oversubscription against PyTorch's own threads).
// When an OpenMP runtime is bound (openmp_runtime.h; the Python binding binds PyTorch's), jobs run
// on that runtime's team instead and the pool stays idle.
#pragma once

namespace flashcore::cpu {

// Runs fn(context, w) for w in [0, workers): w = 0 on the calling thread, the rest on pool threads;
// returns when all are done. Returns the number of workers that ran; 0 without running anything
// when the pool is busy with another call (a concurrent caller or a nested parallel_for), in which
// case the caller runs the work some other way. On a bound OpenMP runtime the team may be smaller
// than `workers` (a nested call gets a team of one): callers must not assume every worker runs. Fewer than `workers` run only if the system
// refuses to create more threads.
int run_on_pool(int workers, void (*fn)(void* context, int worker), void* context);

}  // namespace flashcore::cpu
