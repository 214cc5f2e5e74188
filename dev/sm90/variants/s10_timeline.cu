#include "main_like.h"
#include "s10_timeline.h"
#include "variants.h"

// s10 (issue 14): the library's non-causal 2k tiles with %globaltimer stamps (s10_timeline.h):
// 26 bf16 d128 (the short-keys tile, 128 x 128, two Q buffers), 27 bf16 d256 (128 x 80, the next
// Q prefetched). fc_sm90_timeline copies the last kLaunches launches' stamps to the host.
using namespace flashcore::cuda::sm90;

namespace fc_dev_timeline {
uint64_t* timeline_buffer() {
  static uint64_t* buffer = [] {
    uint64_t* b = nullptr;
    const size_t bytes = size_t(kLaunches) * kMaxCtas * kTimelineSlots * sizeof(uint64_t);
    if (cudaMalloc(&b, bytes) != cudaSuccess) return static_cast<uint64_t*>(nullptr);
    cudaMemset(b, 0, bytes);
    return b;
  }();
  return buffer;
}
int& timeline_next() {
  static int next = 0;
  return next;
}
}  // namespace fc_dev_timeline

flashcore::Status run_variant_s10_d128_bf16_timed(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  if (p.causal) return flashcore::Status::NotSupported("timeline: non-causal only");
  return fc_dev_timeline::launch_timed<FwdTraits<cutlass::bfloat16_t, 128, 128, 128, 2, false, true, 2>>(p, s);
}

flashcore::Status run_variant_s10_d256_bf16_timed(const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  if (p.causal) return flashcore::Status::NotSupported("timeline: non-causal only");
  return fc_dev_timeline::launch_timed<FwdTraits<cutlass::bfloat16_t, 256, 128, 80, 2, false, true, 1, 0, 1, true>>(p, s);
}

// Copies the stamps (kLaunches x kMaxCtas x kTimelineSlots u64) to `host`; returns the slot
// count per CTA, or -1. Resets the launch counter so the next launch fills slot 0.
extern "C" int fc_sm90_timeline(uint64_t* host, int launches, int max_ctas) {
  using namespace fc_dev_timeline;
  if (launches != kLaunches || max_ctas != kMaxCtas || timeline_buffer() == nullptr) return -1;
  cudaDeviceSynchronize();
  const size_t bytes = size_t(kLaunches) * kMaxCtas * kTimelineSlots * sizeof(uint64_t);
  if (cudaMemcpy(host, timeline_buffer(), bytes, cudaMemcpyDeviceToHost) != cudaSuccess) return -1;
  cudaMemset(timeline_buffer(), 0, bytes);
  timeline_next() = 0;
  return kTimelineSlots;
}
