// See bwd_launch.h: the sm80 backward's workspace plan.
#include <algorithm>
#include <cstdint>

#include "cuda/sm80/bwd_launch.h"
#include "cuda/sm80/bwd_tile_size.h"

namespace flashcore::cuda::sm80 {
namespace {

// Deterministic mode caps the dq_accum slices (one per CTA along the key axis) at this many: the
// workspace grows with the slices, and past about a wave of CTAs more of them buy no speed.
constexpr int kMaxDeterministicSplits = 16;

}  // namespace

BwdWorkspace plan_bwd_workspace(const BwdParams& params, int kernel_head_dim) {
  int num_splits = 1;
  if (params.deterministic) {
    const int block_n = bwd_tile_size(kernel_head_dim).block_n;
    const std::int64_t n_blocks = (params.seqlen_k + block_n - 1) / block_n;
    const std::int64_t ctas_per_split = static_cast<std::int64_t>(params.batch) * params.heads_kv;
    // As many splits as fit in one wave (one CTA per SM), rounded down: rounding up left a
    // second, nearly empty wave (B=1, 32 kv heads: 5 splits = 160 CTAs on 132 SMs ran at 0.58-0.62x
    // of the default mode; docs/tuning/backward.md v8).
    const std::int64_t wanted = params.device.sm_count / ctas_per_split;
    num_splits = static_cast<int>(
        std::max<std::int64_t>(1, std::min<std::int64_t>({wanted, n_blocks, kMaxDeterministicSplits})));
  }
  return BwdWorkspace::plan(params, kSeqlenQRounding, kernel_head_dim, num_splits);
}

}  // namespace flashcore::cuda::sm80
