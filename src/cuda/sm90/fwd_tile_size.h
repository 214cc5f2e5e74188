// Tile shapes of the sm90 forward per (head dim, causal), as data with the reason for each.
//
// Budget per CTA (one CTA per SM): 227 KB of shared memory for Q (kBlockM x d) and kStages
// stages each of K and V (kBlockN x d), 16-bit; 64 K registers for 128 producer threads and 128
// per consumer warpgroup (setmaxnreg 24/240 with two consumer warpgroups, 32/160 with three).
// A consumer thread holds S (kBlockN/2 floats), P (kBlockN/4 registers) and O (d/2 floats).
// Measured choices: docs/tuning/forward_sm90.md (H100, 16k tokens; "v3 variants", v6).
#pragma once

namespace flashcore::cuda::sm90 {

struct FwdTileSize {
  int block_m;     // query rows per CTA: 64 per consumer warpgroup (0: no such tile)
  int block_n;     // keys per pipeline stage (the N of the QK^T wgmma)
  int stages;      // K and V pipeline depth
  bool ping_pong;  // consumer warpgroups take turns issuing their GEMMs (named barriers)
  // Causal only: up to this many m_blocks per head, a persistent grid walks zig-zag pairs of
  // m_blocks (tile_scheduler.h's FwdZigZagScheduler); above it, one tile per CTA. 0: never.
  int zigzag_max_m_blocks = 0;
  // Q buffers (1 or 2): with 2, a persistent CTA loads the next tile's Q during the current tile.
  int q_stages = 1;
  // One softmax exponential in this many on the FMA pipe instead of MUFU (0: all on MUFU). At
  // d <= 64 MUFU's exponentials take as long as the tensor cores' two GEMMs, but moving 1 in 8
  // (or 1 in 4) to the FMA pipe measured 7-9 % slower on the H100 (v7), so no tile uses it;
  // kept for A/B variants.
  int exp2_fma_every = 0;
  // Non-causal only: CTAs per cluster along M sharing each K/V tile by TMA multicast (1: none).
  // A 128-row tile reads 1/kBlockM bytes of K/V from L2 per FLOP, ≈ 5-6 TB/s across the H100's
  // 132 SMs at 700 TFLOP/s, near what its L2 delivers; a pair of CTAs reading each tile once
  // halves that. No tile uses it: measured -3 ... +5 % at d128/d256 against these tiles (v8,
  // inside the noise), and the d256 clustered kernel spills 28 B (its consumers get 232
  // registers there, the producer needing 40); dev A/B variants 16-19 keep it measurable.
  int cluster_m = 1;
  // One Q buffer only: prefetch the next tile's Q into L2 during this tile (Traits::kPrefetchNextQ).
  bool prefetch_next_q = false;
  // Bytes a thread writes per store instruction (fwd_epilogue.h): 4 (each its column pair), 8 (pairs
  // swapped between neighbouring lanes: a quad writes a whole 32-byte sector of its row) or 16 (a
  // 4 x 4 transpose across the quad). With 16 the epilogue per tile drops 2.0 -> 0.5 us (d128),
  // 6.5 -> 1.35 us (d256), Q still released after the last QK^T; +3-10 % at 2k-8k where a tile
  // uses 8 or 16 (docs/tuning/forward_sm90.md, v11-v13).
  int o_store_bytes = 4;
};

// Which table: the main one, the one for problems too small to fill the GPU with it, the one for
// short key ranges (run_fwd_for_shape in fwd_launch_template.h picks), the option kernels' one, the
// window kernel's one.
enum class FwdTileKind { kMain, kSmallProblem, kShortKeys, kOptions, kWindow };

// kShortKeys serves seqlen_k up to this.
constexpr int kShortKeysMax = 4096;

constexpr FwdTileSize fwd_tile_size_main(int head_dim, bool causal) {
  // d <= 64: 192 x 128, three consumer warpgroups (160 registers: S 64 + P 32 + O 32), ping-pong
  //   among them. 2 x Q 24 KB + 2 x (K 16 + V 16) = 112 KB. The exponential costs as much as the
  //   tensor cores here, so more warpgroups to hide it under: +10-20 % over 128 x 128 from 2k
  //   keys up (455 -> 545 TFLOP/s at 16k), a little slower at 512-1k. Two Q buffers (there is
  //   room): the next tile's Q arrives during this one. Causal: zig-zag persistent up to 64
  //   m_blocks (with one Q buffer it measured even with one tile per CTA; with two, and the grid
  //   aligned to the bottom: +17-25 % at 1k, +6-18 % at 4k, +11 % at 2k once odd m_block counts
  //   pair their middle blocks across heads).
  //   2 K/V stages: 3 (144 KB) measured even in a full grid and 0.4-5 % behind in an A/B (v8).
  //   O stored 16 bytes a thread-instruction: +3.7 / +2.1 % causal 2k / 4k, +2.9 % non-causal 2k
  //   (fp16, v13 A/B; causal 2k 0.97 -> 1.01x cuDNN).
  if (head_dim <= 64) return {192, 128, 2, true, 64, 2, 0, 1, false, /*o_store_bytes*/ 16};
  // d <= 96: 128 x 128, two warpgroups. 24 + 2 x (24 + 24) = 120 KB; S 64 + P 32 + O 48. Not
  //   tuned; causal scheduling as d128.
  if (head_dim <= 96) return {128, 128, 2, true, 64};
  // d <= 128, non-causal: 128 x 176 (FA3's tile; extended wgmma N). 32 + 2 x (44 + 44) = 208 KB;
  //   S 88 + P 44 + O 64 registers. +2-10 % over 128 x 128 at 8k-16k keys (up to 4k, kShortKeys).
  // d <= 128, causal: 128 x 128 with 3 stages (32 + 3 x 64 = 224 KB): one tile per CTA, so the
  //   deeper pipeline covers each tile's start; +5-15 % at 512-2k keys, even at 16k.
  //   Causal scheduling: zig-zag persistent up to 64 m_blocks (8k keys): +7-14 % at 512-8k; at
  //   16k one tile per CTA stays ahead (643-703 vs 635), its concurrent CTAs sharing one head's
  //   K/V in L2. The next tile's Q prefetched into L2 (one Q buffer; the zig-zag items' second
  //   tile): +4-8 % at 2k, even at 4k (s9 A/B). O stored 8 bytes a thread-instruction: +6.9 /
  //   +2.8 / +4.6 % at 2k / 4k / 8k (v12 A/B). Non-causal 128 x 176 keeps 4-byte stores: 8 bytes
  //   measured +0.7 % at 8k (noise; v12), the epilogue a small part of a tile of that many keys.
  if (head_dim <= 128) {
    return causal ? FwdTileSize{128, 128, 3, true, 64, 1, 0, 1, /*prefetch_next_q*/ true, /*o_store_bytes*/ 8}
                  : FwdTileSize{128, 176, 2, true};
  }
  // d <= 192: 128 x 96. 48 + 2 x (36 + 36) = 192 KB; 128 x 128 would need 240 KB. Not tuned;
  //   causal scheduling as d128/d256.
  if (head_dim <= 192) return {128, 96, 2, false, 64};
  // d <= 256: 128 x 80 (extended wgmma N). 64 + 2 x (40 + 40) = 224 KB, the smem limit; O alone
  //   is 128 registers a thread. Ping-pong, the O rescale under QK^T inside each turn: causal
  //   +1-9 % at 1k-8k keys, non-causal even (-1 ... +6 %) against one warpgroup at a time.
  //   Causal: zig-zag persistent up to 64 m_blocks, +4-10 % at 1k-8k, a little behind at 16k.
  //   One Q buffer (no room for two), so the next tile's Q is prefetched into L2 during this one:
  //   without it the 132 CTAs, which reach their tile boundaries together, all read their 64 KB Q
  //   from HBM at once after their last QK^T. Nsight Compute, bf16 2k non-causal: 412.2 -> 408.8 us
  //   (-0.8 %); A/B +0-5 % at 2k-4k, causal and not (s9).
  //   O stored 8 bytes a thread-instruction: non-causal +10.4 / +6.4 / +3.9 % at 2k / 4k / 8k (v12
  //   A/B), causal +12.9 / +10.9 / +7.0 / +4.3 % at 1k / 2k / 4k / 8k (v13 A/B; 0 spills). 16
  //   bytes measured -3 ... +3 % against 8 (v13): 8 kept.
  return {128, 80, 2, true, 64, 1, 0, 1, /*prefetch_next_q*/ true, /*o_store_bytes*/ 8};
}

// Problems whose 64-row tiles all fit in one wave (B x H x ceil(Sq / 64) <= #SMs): the
// latency of one CTA is the latency of the call, so the shortest chain per CTA wins: one
// consumer warpgroup, 64 rows (256 registers: S 64 + P 32 + O 32). d64 only (the small-shape
// latency case, B=1 H=8 S=512: 64 CTAs instead of 24 of 192 rows; CUDA-graph p50 14.6-16.5 ->
// 10.6-11.1 us, cuDNN 11.8-12.0).
constexpr FwdTileSize fwd_tile_size_small(int head_dim, bool /*causal*/) {
  if (head_dim <= 64) return {64, 128, 2, false};
  return {0, 0, 0, false};
}

// Key ranges up to kShortKeysMax. d128 non-causal: 128 x 128 with two Q buffers (2 x 32 + 2 x
// (32 + 32) = 192 KB): no ragged last key block at 2k/4k (176 leaves 3 % of a tile's keys
// empty there), and with a tile of only 16-32 key blocks the tile boundary (Q latency) counts.
// +1-2 % over 128 x 176 at 2k-4k (bf16 and fp16). O stored 16 bytes a thread-instruction: +7.9 /
// +4.5 % at 2k / 4k (v12 A/B).
constexpr FwdTileSize fwd_tile_size_short_keys(int head_dim, bool causal) {
  if (head_dim > 96 && head_dim <= 128 && !causal) return {128, 128, 2, true, 0, 2, 0, 1, false, /*o_store_bytes*/ 16};
  return {0, 0, 0, false};
}

// The option kernels (window, softcap, ALiBi; fwd_score_options.h): the window's and ALiBi's code
// need registers the main tiles do not have (ptxas: 192 x 128 at d64, 160 registers a thread,
// spilled 88-100 B even window-only; 128 x 176 at d128 non-causal 92-224 B, window-only 108 B),
// so 128 x 128 tiles with two consumer warpgroups
// (240 registers): d64 with two Q buffers (16 + 16 + 2 x (16 + 16) = 96 KB), d128 the causal tile
// (3 stages) for both. The non-causal general softcap/ALiBi kernel runs one tile per CTA
// (fwd_launch_template.h: persistent it spilled 176 B at d128; the one-option kernels kAlibi and
// kSoftcap do not, and are persistent); causal scheduling as the plain kernels'.
constexpr FwdTileSize fwd_tile_size_options(int head_dim, bool causal) {
  if (head_dim <= 64) return {128, 128, 2, true, 64, 2};
  if (head_dim > 96 && head_dim <= 128) return {128, 128, 3, true, 64};
  return fwd_tile_size_main(head_dim, causal);
}

// The window kernel (kWindow: window and dropout, no score code), d128 causal: the plain causal
// tile, whose next-Q prefetch and 8-byte O stores shorten each tile's start and epilogue, which a
// narrow window's short tiles (a 1k window: 9 key blocks) pay every ~14 us. Session 11 measured
// 64 x 64 tiles with two CTAs a SM for narrow windows instead: L2-bound (ncu: L2 79 %, SM 46 %;
// K/V read once per 64 query rows), 0.57x the plain kernel at 16k with a 1k window
// (docs/tuning/forward_sm90_options.md). Elsewhere the option tiles.
constexpr FwdTileSize fwd_tile_size_window(int head_dim, bool causal) {
  if (causal && head_dim > 96 && head_dim <= 128) return fwd_tile_size_main(head_dim, true);
  return fwd_tile_size_options(head_dim, causal);
}

constexpr FwdTileSize fwd_tile_size(FwdTileKind kind, int head_dim, bool causal) {
  return kind == FwdTileKind::kSmallProblem ? fwd_tile_size_small(head_dim, causal)
         : kind == FwdTileKind::kShortKeys  ? fwd_tile_size_short_keys(head_dim, causal)
         : kind == FwdTileKind::kOptions    ? fwd_tile_size_options(head_dim, causal)
         : kind == FwdTileKind::kWindow     ? fwd_tile_size_window(head_dim, causal)
                                            : fwd_tile_size_main(head_dim, causal);
}
constexpr FwdTileSize fwd_tile_size(int head_dim, bool causal) { return fwd_tile_size_main(head_dim, causal); }

}  // namespace flashcore::cuda::sm90
