// Launch configurations for thread-block clusters, shared by the forward's and the backward's
// clustered kernels (the occupancy query and the launch take the same configuration).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace flashcore::cuda::sm90 {

// The attribute asking for clusters of x by y CTAs.
inline cudaLaunchAttribute cluster_dimension(unsigned x, unsigned y) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = x;
  attribute.val.clusterDim.y = y;
  attribute.val.clusterDim.z = 1;
  return attribute;
}

// `grid` CTAs of `threads` threads and `smem_bytes` of dynamic shared memory on `stream`, grouped
// by `*cluster` (which must outlive the configuration: it is referred to, not copied).
inline cudaLaunchConfig_t cluster_launch_config(dim3 grid, unsigned threads, std::size_t smem_bytes,
                                                cudaStream_t stream, cudaLaunchAttribute* cluster) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  config.attrs = cluster;
  config.numAttrs = 1;
  return config;
}

}  // namespace flashcore::cuda::sm90
