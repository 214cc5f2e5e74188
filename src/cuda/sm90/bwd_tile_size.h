// Tile shapes of the sm90 backward per head dim, as data with the reason for each. Plain
// constexpr (no CuTe) so host code (the workspace plan) can read them.
//
// One CTA owns kBlockN keys (K, V loaded once) and sweeps the kBlockM-row query blocks. Two
// consumer warpgroups split the key block: each holds dK and dV for its 64 keys (64 x d fp32
// each, d/2 + d/2 registers a thread) for the whole sweep, so kBlockN = 128 with two warpgroups.
// Per query block a consumer thread also holds Sᵀ and dPᵀ (64 keys x kBlockM queries: kBlockM/4
// floats each) and its half of the dQ partial (kBlockM x d/2: kBlockM*d/256 floats).
//
// Shared memory (16-bit elements): K, V (kBlockN x d), `stages` buffers of Q and dO (kBlockM x d)
// with their LSE and D rows, two dS buffers (kBlockM x kBlockN; two so one barrier per step is
// enough: a warpgroup writes buffer b^1 while the other may still read b in its dQ product), and
// the fp32 dQ staging runs of the bulk reduce-add (kBlockM x d floats). 227 KB is the limit.
#pragma once

namespace flashcore::cuda::sm90 {

struct BwdTileSize {
  int block_m;  // queries per step of the sweep (N of the Sᵀ, dPᵀ products; K of dV, dK)
  int block_n;  // keys per CTA: 64 per consumer warpgroup
  int stages;   // Q and dO pipeline depth
};

// Registers per consumer thread at d128 (setmaxnreg 240): dK 64 + dV 64 + Sᵀ 32 + dPᵀ 32 + dQ 32
// = 224 fp32, the same budget FA3's 64 x 128 causal d128 tile runs on.
// Shared memory at d128: K 32 + V 32 + Q 2x16 + dO 2x16 + dS 2x16 + dQ staging 32 = 192 KB.
// d64: 128 x 128 (FlashAttention-3's d64 tile): dK 32 + dV 32 + Sᵀ 64 + dPᵀ 64 + dQ 32 = 224
//   registers; K 16 + V 16 + Q 2x16 + dO 2x16 + dS 2x32 + dQ staging 32 = 192 KB. Twice the queries per step pays the per-step
//   costs (dS barrier, pipeline waits, dQ bulk-add issue) once for twice the work: on the H100 at
//   bf16 it took the harness backward from 0.81-0.93x to 0.91-1.06x cuDNN (+5 to +17 %, device run 3).
// d96: 64 x 128; 144 KB, 176 registers of accumulators.
// d192 and d256 need another split (dK, dV alone would be 192 / 256 registers): bwd_swapkv_traits.h
//   (the warpgroups split d), whose tile is bwd_swapkv_tile_size below.
constexpr BwdTileSize bwd_tile_size(int head_dim) {
  return head_dim <= 64 ? BwdTileSize{128, 128, 2} : BwdTileSize{64, 128, 2};
}

// Tile of the transposed arrangement (d > 128, bwd_swapkv_traits.h), with the budget behind it.
// d256: 64 x 64, 2 stages of Q and dO, 2 buffers of P and dS:
//   smem K 32 + V 32 + Q 2x32 + dO 2x32 + P 2x8 + dS 2x8 = 224 KB (+ 1 KB of row statistics);
//   registers dVᵀ 64 + dKᵀ 64 + dQᵀ 64 (+ S 16 + dP 16 early in the step) of 240.
// FA3 takes 64 x 80 with one dO stage and one P/dS buffer (196 KB); 2 stages of both Q and dO keep
// the producer a full step ahead (the d128 kernel's pipeline, reused as is), at 20 % more Q/dO
// traffic per key. Two buffers of P and dS let one barrier per step suffice (as above).
constexpr BwdTileSize bwd_swapkv_tile_size(int /*head_dim*/) { return BwdTileSize{64, 64, 2}; }

// The tile of the kernel that serves head dims up to kernel_head_dim (run_bwd's choice): what the
// host-side workspace plan must size by.
constexpr BwdTileSize bwd_kernel_tile_size(int kernel_head_dim) {
  return kernel_head_dim > 128 ? bwd_swapkv_tile_size(kernel_head_dim) : bwd_tile_size(kernel_head_dim);
}

// seqlen_q is padded to this in the workspace (lse_log2, dsum, dq_accum rows): a multiple of every
// block_m so each query block's LSE/D rows and dq_accum tile lie inside the padded rows, and of
// 64 for the shared preprocess kernel.
inline constexpr int kBwdSeqlenQRounding = 128;

}  // namespace flashcore::cuda::sm90
