// Forward tile shapes of the sm80 path, per head dim, as data with the reason for each.
//
// kBlockM query rows x kBlockN key rows per iteration, kNWarps warps each owning kBlockM/kNWarps
// query rows (so the softmax of a row never leaves its warp). Shared memory holds one Q tile and
// one K and one V tile (loads of the next tile overlap the current tile's math, see fwd_kernel.h).
// Measured numbers behind these choices live in docs/tuning/forward.md.
#pragma once

namespace flashcore::cuda::sm80 {

struct FwdTileSize {
  int block_m;
  int block_n;
  int warps;
};

constexpr FwdTileSize fwd_tile_size(int head_dim) {
  // d = 32: 128 x 128: with a small O accumulator (32 fp32 regs/thread) the wide score tile
  //   amortises the per-tile softmax and barriers; 128 x 64 measured 10-13% slower.
  // d = 64: 128 x 64: 128 x 128 holds 128 fp32 scores per thread next to 64 of O and spilled
  //   (~190 bytes); 128 x 64 spills nothing and measured 4-8% faster (S = 1k..16k, bf16).
  // d = 96/128: 128 x 64: acc_o is 96-128 regs/thread, so a 64-wide score tile (64 regs)
  //   keeps the total near 255; 128 x 32 was within 3% (better at 16k, worse at 1k), 64 x 64 and
  //   128 x 128 (8 warps) 5-15% slower; smem 64 KB (d=128): two CTAs per SM.
  // d = 192/256: 128 x 64 with 8 warps: each warp owns 16 rows, halving per-thread acc_o
  //   (128 regs at d=256); smem 128 KB (d=256), within sm80's 163 KB and sm90's 227 KB.
  return head_dim <= 32    ? FwdTileSize{128, 128, 4}
         : head_dim <= 64  ? FwdTileSize{128, 64, 4}
         : head_dim <= 128 ? FwdTileSize{128, 64, 4}
                           : FwdTileSize{128, 64, 8};
}

}  // namespace flashcore::cuda::sm80
