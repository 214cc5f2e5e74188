// See bwd_launch.h: the sm90 backward's workspace plan.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cuda/sm90/bwd_launch.h"
#include "cuda/sm90/bwd_tile_size.h"
#include "cuda/sm90/bwd_varlen_order.h"

namespace flashcore::cuda::sm90 {
namespace {

// Deterministic mode caps the dq_accum slices (one per CTA column along the key axis) at this
// many: the workspace grows with the slices, and past about a wave of CTAs more buy no speed.
constexpr int kMaxDeterministicSplits = 16;

}  // namespace

// FLASHCORE_BWD_VARLEN_ORDER = blocks | sequences | slots (A/B runs; docs/tuning/backward_sm90.md,
// varlen runs 5-6), read at each call so one process can compare them.
BwdVarlenOrderMode bwd_varlen_order_mode() {
  const char* env = std::getenv("FLASHCORE_BWD_VARLEN_ORDER");
  const std::string mode = env == nullptr ? "" : env;
  if (mode == "blocks") return BwdVarlenOrderMode::kBlocks;
  if (mode == "slots") return BwdVarlenOrderMode::kSlots;
  return BwdVarlenOrderMode::kSequences;
}

BwdWorkspace plan_bwd_workspace(const BwdParams& params, int kernel_head_dim) {
  int num_splits = 1;
  if (params.deterministic) {
    // As many slices as fit in one wave (one CTA per SM), rounded down, as the sm80 family does
    // (rounding up left a second, nearly empty wave there).
    // The keys per CTA of the kernel that runs (64 at d256, 128 below): the slices are capped at
    // its key blocks.
    const int block_n = bwd_kernel_tile_size(kernel_head_dim).block_n;
    const std::int64_t n_blocks = (params.seqlen_k + block_n - 1) / block_n;
    const std::int64_t ctas_per_split = static_cast<std::int64_t>(params.batch) * params.heads_kv;
    const std::int64_t wanted = params.device.sm_count / std::max<std::int64_t>(ctas_per_split, 1);
    num_splits = static_cast<int>(
        std::max<std::int64_t>(1, std::min<std::int64_t>({wanted, n_blocks, kMaxDeterministicSplits})));
  }
  BwdWorkspace w = BwdWorkspace::plan(params, kBwdSeqlenQRounding, kernel_head_dim, num_splits);
  // Varlen, default mode (the d <= 128 kernels): one work-list entry per CTA of the grid's x
  // (bwd_varlen_order.h; BwdWork::slots' count).
  if (params.cu_seqlens_q != nullptr && !params.deterministic && kernel_head_dim <= 128) {
    const int block_n = bwd_kernel_tile_size(kernel_head_dim).block_n;
    w.add_varlen_work(params.total_k / block_n + params.batch);
  }
  return w;
}

}  // namespace flashcore::cuda::sm90
