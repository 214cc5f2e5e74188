// The per-(device, stream) cache of the decode kernels' split workspace; decode_workspace.h says why
// and what the rules are.
#include "cuda/decode_workspace.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "cuda/common/cuda_check.h"

namespace flashcore::cuda {

namespace {

struct CachedWorkspace {
  int device = -1;
  cudaStream_t stream = nullptr;
  unsigned char* data = nullptr;
  std::size_t counter_bytes = 0;  // [0, counter_bytes): counters, zero between calls
  std::size_t partial_bytes = 0;  // [counter_bytes, counter_bytes + partial_bytes): partials
};

constexpr std::size_t kAlign = 256;
std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// A fixed table: a process uses a handful of streams; when it is full, calls fall back to
// stream-ordered allocations.
constexpr int kCachedWorkspaces = 64;

struct WorkspaceCache {
  std::mutex mutex;
  CachedWorkspace entries[kCachedWorkspaces];
  int used = 0;
  std::vector<void*> retired;  // grown-out buffers: earlier graphs may still read them
};

WorkspaceCache& cache() {
  static WorkspaceCache* instance = new WorkspaceCache;  // never destroyed: no teardown-order trouble
  return *instance;
}

bool forced_stream_ordered() {
  static const bool on = [] {
    const char* env = std::getenv("FLASHCORE_DECODE_WORKSPACE");
    return env != nullptr && std::strcmp(env, "stream-ordered") == 0;
  }();
  return on;
}

Status stream_ordered(cudaStream_t stream, std::size_t partial_bytes, std::size_t counters_bytes,
                      DecodeWorkspace* workspace) {
  void* data = nullptr;
  FLASHCORE_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&data, aligned(counters_bytes) + partial_bytes, stream));
  workspace->owned = data;
  workspace->counters = data;
  workspace->partials = static_cast<unsigned char*>(data) + aligned(counters_bytes);
  if (counters_bytes > 0) FLASHCORE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(data, 0, counters_bytes, stream));
  return Status::Ok();
}

}  // namespace

Status acquire_decode_workspace(int device, cudaStream_t stream, std::size_t partial_bytes,
                                std::size_t counters_bytes, DecodeWorkspace* workspace) {
  *workspace = DecodeWorkspace{};
  if (partial_bytes == 0 && counters_bytes == 0) return Status::Ok();
  if (forced_stream_ordered()) return stream_ordered(stream, partial_bytes, counters_bytes, workspace);
  WorkspaceCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  CachedWorkspace* entry = nullptr;
  for (int e = 0; e < c.used; ++e) {
    if (c.entries[e].device == device && c.entries[e].stream == stream) entry = &c.entries[e];
  }
  if (entry == nullptr || entry->counter_bytes < counters_bytes || entry->partial_bytes < partial_bytes) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    FLASHCORE_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capture));
    if (capture != cudaStreamCaptureStatusNone || (entry == nullptr && c.used == kCachedWorkspaces)) {
      return stream_ordered(stream, partial_bytes, counters_bytes, workspace);
    }
    // Grow: a new buffer, zeroed in stream order (the counters must start at zero; the partials are
    // written before they are read), each region half again what is asked so a slowly rising batch
    // does not reallocate each call.
    const std::size_t old_counters = entry == nullptr ? 0 : entry->counter_bytes;
    const std::size_t old_partials = entry == nullptr ? 0 : entry->partial_bytes;
    const std::size_t new_counters = aligned(std::max(old_counters, counters_bytes + counters_bytes / 2));
    const std::size_t new_partials = aligned(std::max(old_partials, partial_bytes + partial_bytes / 2));
    void* data = nullptr;
    FLASHCORE_CUDA_RETURN_IF_ERROR(cudaMalloc(&data, new_counters + new_partials));
    const cudaError_t zeroed = cudaMemsetAsync(data, 0, new_counters, stream);
    if (zeroed != cudaSuccess) {
      cudaFree(data);
      return cuda_status(zeroed, "cudaMemsetAsync(decode workspace counters)");
    }
    if (entry == nullptr) {
      entry = &c.entries[c.used++];
      entry->device = device;
      entry->stream = stream;
    } else {
      c.retired.push_back(entry->data);
    }
    entry->data = static_cast<unsigned char*>(data);
    entry->counter_bytes = new_counters;
    entry->partial_bytes = new_partials;
  }
  workspace->counters = entry->data;
  workspace->partials = entry->data + entry->counter_bytes;
  return Status::Ok();
}

Status release_decode_workspace(const DecodeWorkspace& workspace, cudaStream_t stream) {
  if (workspace.owned == nullptr) return Status::Ok();
  return cuda_status(cudaFreeAsync(workspace.owned, stream), "cudaFreeAsync(decode workspace)");
}

}  // namespace flashcore::cuda
