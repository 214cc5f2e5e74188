// Which key block a CTA of the sm90 backward's default-mode grid takes, causal: longest sweeps
// first across a few (batch, kv head) units at a time, so the grid does not end on a long sweep.
//
// The grid is (n_blocks, heads_kv * kv_splits, batch), launched x fastest. Taken as is, a causal
// grid runs each unit's key blocks longest first (block 0 sweeps every query block, the last one
// only the diagonal), then the next unit's: when a unit has fewer key blocks than the GPU has SMs
// (d256, 64-key blocks: 32 at 2k, 64 at 4k), the last unit's block 0 starts a full sweep a few
// short blocks before the grid ends and the other SMs idle behind it. Ordered by key block across
// a section of `l2_section` units instead (every unit's block 0, then every unit's block 1, ...),
// the last long sweep starts about a section's worth of work before the end. The section is the
// largest power of two of units whose Q, dO and dq_accum (the data the CTAs running together
// stream) fit in ~40 MB of L2: more units at once would send the Q/dO reads and the dq_accum
// reductions to HBM (deterministic mode's lesson, docs/tuning/backward_sm90.md run 8).
// FlashAttention-3's backward LPT scheduler orders its tiles by the same rule (read, not copied).
//
// Clusters (kv_splits CTAs along y sharing a kv head's group): the unit of the order is the
// cluster, so a cluster's CTAs (same x and z, same y / kv_splits) get the same key block, unit and
// batch, and keep their rank (y % kv_splits).
#pragma once

#include <cstdint>

namespace flashcore::cuda::sm90 {

// Units per L2 section (host): 0 keeps the grid's own order (non-causal: equal sweeps).
inline int bwd_l2_section_units(bool causal, int units, int group_size, int seqlen_q, int kernel_head_dim,
                                int element_bytes) {
  if (!causal || units <= 1) return 0;
  constexpr std::int64_t kL2Bytes = 40ll << 20;
  // Q and dO (element_bytes each) and dq_accum (fp32) rows of every query head of the unit.
  const std::int64_t unit_bytes =
      static_cast<std::int64_t>(group_size) * seqlen_q * kernel_head_dim * (2 * element_bytes + 4);
  int section = 1;
  while (section * 2 <= units && unit_bytes * section * 2 <= kL2Bytes) section *= 2;
  return section;
}

struct BwdTileCoord {
  int n_block;
  int y;  // kv head * kv_splits + rank, as blockIdx.y
  int batch;
};

// The tile of the CTA at launch coordinates (bx, by, bz) of a grid (grid_x = n_blocks, grid_y =
// heads_kv * kv_splits, grid_z = batch), for `section` >= 1 units a section. Pure and constexpr
// (so device code calls it under --expt-relaxed-constexpr, and tests/cpu/bwd_tile_order_test.cpp
// checks on the host that it is a bijection that keeps clusters together).
constexpr BwdTileCoord bwd_tile_in_l2_sections(int bx, int by, int bz, int grid_x, int grid_y, int grid_z,
                                               int section, int kv_splits) {
  const int n_blocks = grid_x;
  const int heads_kv = grid_y / kv_splits;
  const int units = heads_kv * grid_z;
  // Launch order of the cluster (x fastest, then kv head, then batch).
  const int cluster = bx + n_blocks * (by / kv_splits + heads_kv * bz);
  const int per_section = section * n_blocks;
  const int first_unit = cluster / per_section * section;
  const int in_section = cluster % per_section;
  const int width = units - first_unit < section ? units - first_unit : section;  // the last section may be short
  const int unit = first_unit + in_section % width;
  BwdTileCoord c{};
  c.n_block = in_section / width;
  c.y = (unit % heads_kv) * kv_splits + by % kv_splits;
  c.batch = unit / heads_kv;
  return c;
}

// Units (kv head, batch) of the d <= 128 kernels' causal default grid taken longest sweep first at
// its tail (host; bwd_tile_tail_longest_first below): as many as keep their Q and dO within 16 MB
// of L2, and no more than about 1.5 waves of longest sweeps need (3 x clusters a wave / key blocks).
// bf16 d128, 16k tokens, 132 SMs: MHA 8k 4 of 32 units, 4k 8 of 64, 2k 16 of 128; GQA 8:1 4k (2
// CTAs a group, 4 query heads a CTA) 2 of 8. `heads_per_cta` = group_size / kv_splits.
inline int bwd_tail_units(int units, int n_blocks, int heads_per_cta, int seqlen_q, int kernel_head_dim,
                          int element_bytes, int sm_count, int kv_splits) {
  constexpr std::int64_t kTailBytes = 16ll << 20;
  if (units <= 0 || n_blocks <= 0) return 0;
  const std::int64_t unit_bytes = std::int64_t(heads_per_cta) * seqlen_q * kernel_head_dim * 2 * element_bytes;
  const std::int64_t by_l2 = unit_bytes > 0 ? kTailBytes / unit_bytes : units;
  const int clusters_per_wave = sm_count / kv_splits > 0 ? sm_count / kv_splits : 1;
  const int by_waves = (3 * clusters_per_wave + n_blocks - 1) / n_blocks;
  std::int64_t tail = by_l2 < by_waves ? by_l2 : by_waves;
  if (tail < 1) tail = 1;
  return int(tail < units ? tail : units);
}

// The d <= 128 kernels' causal default grid (Traits::kTailLongestFirst; the d128 default since
// docs/tuning/backward_sm90.md's runs 13-14: causal +7.6 % mean on the H100, to +15.5 %):
// only the last `tail_units` units of the launch order are taken by key block (every tail
// unit's block 0, then block 1, ...); the units before them keep the grid's own order and so
// their L2 reuse (device run 12's variant 15 ordered every unit in chunks and lost up to 13 % on
// GQA 8:1 causal). The tail is what ends the grid: left as is, its last unit's block 0 starts a
// full sweep a few short blocks before the end. Same launch order and cluster rule as above.
constexpr BwdTileCoord bwd_tile_tail_longest_first(int bx, int by, int bz, int grid_x, int grid_y, int grid_z,
                                                   int tail_units, int kv_splits) {
  const int n_blocks = grid_x;
  const int heads_kv = grid_y / kv_splits;
  const int units = heads_kv * grid_z;
  const int tail = tail_units < units ? (tail_units > 0 ? tail_units : 1) : units;
  const int cluster = bx + n_blocks * (by / kv_splits + heads_kv * bz);
  const int first_tail = (units - tail) * n_blocks;
  int unit = cluster / n_blocks;
  int n_block = cluster % n_blocks;
  if (cluster >= first_tail) {
    const int within = cluster - first_tail;
    unit = units - tail + within % tail;
    n_block = within / tail;
  }
  BwdTileCoord c{};
  c.n_block = n_block;
  c.y = (unit % heads_kv) * kv_splits + by % kv_splits;
  c.batch = unit / heads_kv;
  return c;
}

}  // namespace flashcore::cuda::sm90
