// Tile shapes of the sm90 forward per (head dim, causal), as data with the reason for each.
//
// Budget per CTA (one CTA per SM): 227 KB of shared memory for Q (kBlockM x d), and kStages
// stages each of K (kBlockN x d) and V (kBlockN x d), 16-bit; 64 K registers for
// 128 producer threads and 128 per consumer warpgroup (setmaxnreg 24 / 240 with two consumer
// warpgroups). A consumer thread holds S (kBlockN/2 floats), P (kBlockN/4 registers) and
// O (d/2 floats) for its two rows of each of its warpgroup's 64-row slab.
#pragma once

namespace flashcore::cuda::sm90 {

struct FwdTileSize {
  int block_m;  // query rows per CTA: 64 per consumer warpgroup
  int block_n;  // keys per pipeline stage (the N of the QK^T wgmma)
  int stages;   // K and V pipeline depth
  bool ping_pong;  // the two consumer warpgroups take turns issuing their GEMMs (named barriers)
};

constexpr FwdTileSize fwd_tile_size(int head_dim, bool causal) {
  (void)causal;  // same tiles for now; causal shapes will be chosen by measurement
  // Ping-pong: while one warpgroup runs its softmax, the other's GEMMs own the tensor cores.
  // FA3 uses it for d <= 128; above, O's registers leave too little room and the exp is only
  // a quarter of the tensor time.
  // d <= 64: 128 x 128. Q 16 KB + 2 x (K 16 KB + V 16 KB) = 80 KB. FA3 uses 192 x 192 with three
  //   warpgroups and P through smem; two warpgroups keep one register split for every dim.
  if (head_dim <= 64) return {128, 128, 2, true};
  // d <= 96: 128 x 128. 24 + 2 x (24 + 24) = 120 KB; S 64 + P 32 + O 48 registers.
  if (head_dim <= 96) return {128, 128, 2, true};
  // d <= 128: 128 x 128. 32 + 2 x (32 + 32) = 160 KB; S 64 + P 32 + O 64 registers.
  //   FA3's 128 x 176 (208 KB) is the next step once the pipeline is tuned.
  if (head_dim <= 128) return {128, 128, 2, true};
  // d <= 192: 128 x 96. 48 + 2 x (36 + 36) = 192 KB; 128 x 128 would need 240 KB.
  if (head_dim <= 192) return {128, 96, 2, false};
  // d <= 256: 128 x 80 (extended wgmma N). 64 + 2 x (40 + 40) = 224 KB, the smem limit;
  //   O alone is 128 registers a thread, so S stays small.
  return {128, 80, 2, false};
}

}  // namespace flashcore::cuda::sm90
