// Programmatic dependent launch (PDL, compute capability 9.0 on): a kernel launched with
// launch_kernel(..., dependent = true) may be started while the kernel before it on the stream is
// still finishing, so its CTAs are placed and its prologue runs during the other's tail instead of
// after it. Small kernels that follow each other closely pay that launch gap on every call — the
// decode step at batch 1 is ~20 us of which each kernel boundary costs ~1-2 us (docs/kvcache.md, v4).
//
// The contract, on the device:
//   - wait_for_prior_grids() comes before the kernel's first global-memory access, read or write:
//     it returns once every grid the launch depends on has completed and its writes are visible.
//     So a dependent launch is exactly as ordered as a plain one for memory; only the placement of
//     CTAs and the work before the wait overlap.
//   - allow_dependent_grids() lets the next dependent kernel on the stream be launched once every
//     CTA of this grid has called it (or exited). The next kernel then waits in its own
//     wait_for_prior_grids() for this one's completion; it only takes SM slots this grid no longer
//     needs (all of this grid's CTAs are resident by then).
// Both are no-ops below sm_90 and in a kernel launched without the attribute.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace flashcore::cuda {

__device__ __forceinline__ void wait_for_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_dependent_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Launches kernel<<<grid, block, smem, stream>>>(args...), as a programmatic dependent launch of
// the stream's previous kernel when `dependent` (the caller asks only on compute capability >= 9.0,
// for kernels that call wait_for_prior_grids first).
template <class... Params, class... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          bool dependent, Args&&... args) {
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = dependent ? attribute : nullptr;
  config.numAttrs = dependent ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace flashcore::cuda
