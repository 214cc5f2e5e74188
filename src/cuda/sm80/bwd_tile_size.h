// Backward tile shapes of the sm80 path, per head dim, as data with the reason for each. Plain
// constexpr (no CuTe) so that host code (workspace sizing in backward.cu) can read them too.
//
// One CTA owns a kBlockN-row block of keys and loops over kBlockM-row blocks of queries. Shared
// memory holds K, V (kBlockN x d), Q and dO (kBlockM x d, `stages` buffers each so the next
// block loads during this one's math) and P, dS (kBlockM x kBlockN, to be re-read transposed).
// Registers hold dK and dV (kBlockN x d fp32) for the whole loop, plus S and dP (kBlockM x
// kBlockN fp32) or the dQ partial (kBlockM x d fp32) at a time. 8 warps; the three MMAs tile
// their warps differently:
//   atom_m_sdp: warps along M for S = Q Kᵀ and dP = dO Vᵀ (the rest along N)
//   atom_n_dkv: warps along N for dV = Pᵀ dO and dK = dSᵀ Q (the rest along d)
//   atom_m_dq:  warps along M for dQ = dS K (the rest along d)
// Each product's warp tile must divide its block: 16*atom rows and 16*(8/atom) columns.
// Shared memory sizes are for 2-byte elements, LSE/D rows included; sm80 allows 163 KB a CTA,
// sm90 227 KB.
// Measured numbers behind these choices live in docs/tuning/backward.md.
#pragma once

namespace flashcore::cuda::sm80 {

struct BwdTileSize {
  int block_m;
  int block_n;
  int warps;
  int atom_m_sdp;
  int atom_n_dkv;
  int atom_m_dq;
  int stages;  // buffers for Q and dO
};

constexpr BwdTileSize bwd_tile_size(int head_dim) {
  // d <= 64: 128 x 128 tiles halve the dQ atomics per flop against 64-row query blocks; S and
  //   dP are 64 fp32 regs each per thread (warps 4 along M), dK/dV 32 each; smem 162 KB (d=64).
  // d = 96/128: dK + dV grow to 128 regs/thread (d=128), so the query block shrinks to 64 rows
  //   (S, dP 32 regs each); smem 161 KB (d=128). d=96 needs warps 4 along M for dQ (96 is not
  //   a multiple of the 64 columns that 2 x 4 warps would tile).
  // d = 192/256: 64 x 64 keeps dK + dV at 128 regs/thread (d=256) and dQ at 64; d=256 single-
  //   buffers Q and dO to fit sm80's 163 KB (145 KB; 209 KB double-buffered), d=192 keeps two
  //   buffers (161 KB).
  return head_dim <= 64    ? BwdTileSize{128, 128, 8, 4, 4, 4, 2}
         : head_dim <= 96  ? BwdTileSize{64, 128, 8, 2, 4, 4, 2}
         : head_dim <= 128 ? BwdTileSize{64, 128, 8, 2, 4, 2, 2}
         : head_dim <= 192 ? BwdTileSize{64, 64, 8, 4, 2, 2, 2}
                           : BwdTileSize{64, 64, 8, 4, 2, 2, 1};
}

// Padding of seqlen_q in the sm80 backward's workspace: a multiple of every backward kBlockM, so a
// query block's rows never index past the buffers and need no bounds checks there.
inline constexpr int kSeqlenQRounding = 128;

}  // namespace flashcore::cuda::sm80
