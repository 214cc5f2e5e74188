// Tile shapes of the sm90 forward per (head dim, causal), as data with the reason for each.
//
// Budget per CTA (one CTA per SM): 227 KB of shared memory for Q (kBlockM x d) and kStages
// stages each of K and V (kBlockN x d), 16-bit; 64 K registers for 128 producer threads and 128
// per consumer warpgroup (setmaxnreg 24/240 with two consumer warpgroups, 32/160 with three).
// A consumer thread holds S (kBlockN/2 floats), P (kBlockN/4 registers) and O (d/2 floats).
// Measured choices: docs/tuning/forward_sm90.md (H100, bf16, 16k tokens; "v3 variants").
#pragma once

namespace flashcore::cuda::sm90 {

struct FwdTileSize {
  int block_m;     // query rows per CTA: 64 per consumer warpgroup
  int block_n;     // keys per pipeline stage (the N of the QK^T wgmma)
  int stages;      // K and V pipeline depth
  bool ping_pong;  // consumer warpgroups take turns issuing their GEMMs (named barriers)
};

constexpr FwdTileSize fwd_tile_size(int head_dim, bool causal) {
  // d <= 64: 192 x 128, three consumer warpgroups (160 registers: S 64 + P 32 + O 32), ping-pong
  //   among them. Q 24 KB + 2 x (K 16 + V 16) = 88 KB. The exponential costs as much as the
  //   tensor cores here, so more warpgroups to hide it under: +10-20 % over 128 x 128 from 2k
  //   keys up (455 -> 545 TFLOP/s at 16k), a little slower at 512-1k.
  if (head_dim <= 64) return {192, 128, 2, true};
  // d <= 96: 128 x 128, two warpgroups. 24 + 2 x (24 + 24) = 120 KB; S 64 + P 32 + O 48. Not tuned.
  if (head_dim <= 96) return {128, 128, 2, true};
  // d <= 128, non-causal: 128 x 176 (FA3's tile; extended wgmma N). 32 + 2 x (44 + 44) = 208 KB;
  //   S 88 + P 44 + O 64 registers. +2-10 % over 128 x 128.
  // d <= 128, causal: 128 x 128 with 3 stages (32 + 3 x 64 = 224 KB): one tile per CTA, so the
  //   deeper pipeline covers each tile's start; +5-15 % at 512-2k keys, even at 16k.
  if (head_dim <= 128) return causal ? FwdTileSize{128, 128, 3, true} : FwdTileSize{128, 176, 2, true};
  // d <= 192: 128 x 96. 48 + 2 x (36 + 36) = 192 KB; 128 x 128 would need 240 KB. Not tuned.
  if (head_dim <= 192) return {128, 96, 2, false};
  // d <= 256: 128 x 80 (extended wgmma N). 64 + 2 x (40 + 40) = 224 KB, the smem limit; O alone
  //   is 128 registers a thread. No ping-pong (measured equal at 2k-16k, slower at 512; FA3 agrees):
  //   the exponential is a quarter of the tensor time, and O is rescaled under QK^T instead.
  return {128, 80, 2, false};
}

}  // namespace flashcore::cuda::sm90
