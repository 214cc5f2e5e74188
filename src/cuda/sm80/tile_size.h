// Forward tile shapes of the sm80 path, per head dim, as data with the reason for each.
//
// kBlockM query rows x kBlockN key rows per iteration, kNWarps warps each owning kBlockM/kNWarps
// query rows (so the softmax of a row never leaves its warp). Shared memory holds one Q tile and
// kv_stages K and V tiles (loads of the next tile overlap the current tile's math, see fwd_kernel.h).
// Measured numbers behind these choices live in docs/tuning/forward.md.
#pragma once

namespace flashcore::cuda::sm80 {

struct FwdTileSize {
  int block_m;
  int block_n;
  int warps;
  int kv_stages;  // K and V buffers each (FwdTraits::kStagesKV)
};

constexpr FwdTileSize fwd_tile_size(int head_dim, bool causal) {
  // d = 32: 128 x 128: with a small O accumulator (32 fp32 regs/thread) the wide score tile
  //   amortises the per-tile softmax and barriers; 128 x 64 measured 10-13% slower.
  // d = 64: 128 x 64: 128 x 128 holds 128 fp32 scores per thread next to 64 of O and spilled
  //   (~190 bytes); 128 x 64 spills nothing and measured 4-8% faster (S = 1k..16k, bf16).
  // d = 96/128: 128 x 64: acc_o is 96-128 regs/thread, so a 64-wide score tile (64 regs)
  //   keeps the total near 255; 128 x 32 was within 3% (better at 16k, worse at 1k), 64 x 64 and
  //   128 x 128 (8 warps) 5-15% slower; smem 80 KB (d=128, two K/V stages): two CTAs per SM.
  // d = 192/256: 128 x 64 with 8 warps: each warp owns 16 rows, halving per-thread acc_o
  //   (128 regs at d=256); smem 128 KB (d=256), within sm80's 163 KB and sm90's 227 KB.
  //
  // K/V stages (two buffers each let the next key block load during a whole iteration instead of
  // half of one), measured on the H100 at S = 512..16k, bf16 (docs/tuning/forward.md, v6):
  //   d = 128: two, causal and not: +2-5%.
  //   d = 64, 96 non-causal: two: +12% at S = 512 down to +2% at 16k (d=64).
  //   d = 64, 96 causal: one: two measured 3-7% slower from S = 1k on (d=64).
  //   d = 32, 192, 256: one: two measured 1-8% slower (d=256 and d=192 run one 8-warp CTA per SM,
  //   where the bigger footprint buys nothing; at d=256 two buffers would also exceed sm80's smem).
  const int kv_stages = head_dim == 128 || (!causal && (head_dim == 64 || head_dim == 96)) ? 2 : 1;
  return head_dim <= 32    ? FwdTileSize{128, 128, 4, 1}
         : head_dim <= 64  ? FwdTileSize{128, 64, 4, kv_stages}
         : head_dim <= 128 ? FwdTileSize{128, 64, 4, kv_stages}
                           : FwdTileSize{128, 64, 8, 1};
}

}  // namespace flashcore::cuda::sm80
