// Which threads the CPU backends run on.
//
// By default flashcore's CPU backends run on a pool of their own (created on first use, as many
// threads as a call's num_threads). A host that runs its own work on an OpenMP runtime can have
// flashcore run on that runtime's threads instead: PyTorch's CPU ops run on its OpenMP team, whose
// threads spin for a while after every op, so a pool of flashcore's own would find their cores
// taken right after each torch op. The Python binding binds PyTorch's runtime when PyTorch's
// parallel backend is OpenMP.
#pragma once

#include "flashcore/tensor.h"

namespace flashcore {

// Runs the CPU backends' threaded work on the OpenMP runtime `runtime_library` (a path or soname,
// e.g. ".../torch/lib/libgomp.so.1"), which must already be loaded in this process; it is never
// loaded by this call. Each call then uses a team of at most its num_threads threads of that
// runtime (OpenMP numbers the caller 0). Null or "" goes back to flashcore's own pool. Results do
// not depend on which threads run them. Rejected (kInvalidArgument, the choice unchanged) when the
// library is not loaded or is not an OpenMP runtime (no GOMP_parallel / omp_get_thread_num).
Status use_openmp_threads(const char* runtime_library);

}  // namespace flashcore
