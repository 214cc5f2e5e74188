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
  // d <= 64: 128 x 128 keeps the O accumulator small (64 fp32 regs/thread at d=64) and gives each
  //   warp a long K loop per tile; smem 48 KB (d=64).
  // d = 96/128: 128 x 64: acc_o grows to 96-128 regs/thread, so halve the score tile (32 regs of
  //   S per thread) to stay under 255 registers without spills; smem 64 KB (d=128).
  // d = 192/256: 128 x 64 with 8 warps: each warp owns 16 rows, halving per-thread acc_o
  //   (128 regs at d=256); smem 128 KB (d=256), within sm80's 163 KB and sm90's 227 KB.
  return head_dim <= 64    ? FwdTileSize{128, 128, 4}
         : head_dim <= 128 ? FwdTileSize{128, 64, 4}
                           : FwdTileSize{128, 64, 8};
}

}  // namespace flashcore::cuda::sm80
