// The split-KV decode kernels' workspace (partial outputs, partial LSEs and the arrival counters of
// decode_combine.h's fused merge), kept per (device, stream) instead of allocated each call.
//
// Why: under CUDA graphs a stream-ordered allocation is an alloc and a free node around the kernels,
// 1.2-2.5 us of a ~25 us batch-1 decode step (docs/kvcache.md, v4); and the fused merge's counters
// must be zero when a call starts, which a buffer that persists gets for free (the last CTA of each
// counter wraps it back to 0), where a fresh one needs a memset each call.
//
// Rules: one buffer per (device, stream), grown (never shrunk) outside stream capture; a grown-out
// buffer is kept, not freed, because a CUDA graph captured earlier may still use it. Calls on one
// stream are ordered, so they share its buffer safely; a graph replays with the buffer of the stream
// it was captured on, so replaying it concurrently with other calls on that capture stream (or two
// graphs of one capture stream concurrently) is not supported. When the stream is capturing and its
// buffer is missing or too small, the call falls back to a stream-ordered allocation with a memset of
// the counters (correct, the graph just holds three more nodes). FLASHCORE_DECODE_WORKSPACE=
// stream-ordered forces that fallback on every call (A/B runs).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "flashcore/tensor.h"

namespace flashcore::cuda {

struct DecodeWorkspace {
  void* counters = nullptr;  // counters_bytes, zero when the kernels start (they leave it zero)
  void* partials = nullptr;  // partial_bytes, contents undefined
  void* owned = nullptr;     // a stream-ordered fallback allocation: the caller frees it on the stream
};

// A cached buffer is laid out [counter region | partials]; its counter region has a fixed size, so
// the zeros the kernels leave behind are where the next call's counters are, whatever its shape
// (a layout that moved the counters with the partials' size would find stale partials there).
Status acquire_decode_workspace(int device, cudaStream_t stream, std::size_t partial_bytes,
                                std::size_t counters_bytes, DecodeWorkspace* workspace);

// Frees a fallback allocation on the stream (nothing for a cached buffer).
Status release_decode_workspace(const DecodeWorkspace& workspace, cudaStream_t stream);

}  // namespace flashcore::cuda
