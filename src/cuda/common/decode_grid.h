// A decode launch's grid before and after the key split, shared by the sm80 launcher (global merge)
// and sm90's cluster launcher: CTAs without a split (batch x kv heads x blocks of packed query
// rows), key tiles a sequence, and the split count (the caller's, or common/decode_splits.h's
// heuristic at the kernel's occupancy), capped by the tiles and by what the kernel's merge holds.
// And what a decode launcher asks the driver of its kernel, once per device (a decode step is a
// few microseconds; docs/reviews/session11.md F12).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>

#include "cuda/common/cuda_check.h"
#include "cuda/common/decode_splits.h"
#include "cuda/params.h"

namespace flashcore::cuda {

struct DecodeGrid {
  int m_blocks = 1;         // blocks of kRows packed query rows (the GQA group x seqlen_q) a kv head
  long long base_ctas = 1;  // batch x heads_kv x m_blocks: the grid of one split
  long long tiles = 1;      // key tiles of the longest sequence
  int num_splits = 1;
};

// The per-device facts of the decode kernel whose CTA is `Traits` (one kernel a Traits type: the
// statics belong to this instantiation). set_up runs `setup` (the kernel's cudaFuncSetAttribute
// opt-ins) once per device; the flag records which kernel it ran for, because the dynamic linker
// unifies such statics across shared libraries (sm90/fwd_launch_template.h says more), so a second
// copy of the library runs its own once more. ctas_per_sm: the driver's occupancy at Traits'
// threads and shared memory, asked once per device (the same code and bytes in any copy).
template <class Traits>
class DecodeKernelOnDevice {
 public:
  static constexpr int kTrackedDevices = 64;  // devices past these ask the driver on every call

  template <class Kernel, class Setup>
  static Status set_up(Kernel kernel, int device, Setup&& setup) {
    const void* const id = reinterpret_cast<const void*>(kernel);
    const bool tracked = device >= 0 && device < kTrackedDevices;
    if (tracked && set_up_for_[device].load(std::memory_order_acquire) == id) return Status::Ok();
    FLASHCORE_RETURN_IF_ERROR(setup());
    if (tracked) set_up_for_[device].store(id, std::memory_order_release);
    return Status::Ok();
  }

  template <class Kernel>
  static Status ctas_per_sm(Kernel kernel, int device, int* per_sm) {
    const bool tracked = device >= 0 && device < kTrackedDevices;
    if (tracked) {
      if (const int known = ctas_per_sm_[device].load(std::memory_order_relaxed); known > 0) {
        *per_sm = known - 1;
        return Status::Ok();
      }
    }
    FLASHCORE_CUDA_RETURN_IF_ERROR(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, kernel, Traits::kThreads, Traits::kSmemBytes));
    if (tracked) ctas_per_sm_[device].store(*per_sm + 1, std::memory_order_relaxed);
    return Status::Ok();
  }

 private:
  static inline std::atomic<const void*> set_up_for_[kTrackedDevices] = {};
  static inline std::atomic<int> ctas_per_sm_[kTrackedDevices] = {};  // value + 1; 0: not asked yet
};

template <class Traits, class Kernel>
Status decode_grid(const DecodeParams& params, Kernel kernel, int max_splits, DecodeGrid* grid) {
  const int rows = params.group_size * params.seqlen_q;
  grid->m_blocks = (rows + Traits::kRows - 1) / Traits::kRows;
  grid->base_ctas = static_cast<long long>(params.batch) * params.heads_kv * grid->m_blocks;
  grid->tiles = (std::max(params.max_seqlen_k, 1) + Traits::kBlockN - 1) / Traits::kBlockN;
  int num_splits = params.num_splits;
  if (num_splits == 0) {
    int per_sm = 1;
    FLASHCORE_RETURN_IF_ERROR(DecodeKernelOnDevice<Traits>::ctas_per_sm(kernel, params.device.ordinal, &per_sm));
    num_splits = choose_decode_splits(grid->base_ctas, grid->tiles, params.device.sm_count, per_sm, max_splits);
  }
  // A forced count is capped too: by the tiles (an empty split only adds work) and max_splits.
  grid->num_splits =
      static_cast<int>(std::clamp<long long>(num_splits, 1, std::min<long long>(grid->tiles, max_splits)));
  return Status::Ok();
}

}  // namespace flashcore::cuda
