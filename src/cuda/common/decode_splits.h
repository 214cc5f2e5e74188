// How many CTAs share the keys of one (sequence, kv head, row block) in the decode kernels
// (split-KV, "flash-decoding"), when the caller passes num_splits = 0. Host code, no CUDA: tested
// on the CPU (tests/cpu/decode_splits_test.cpp).
//
// The reasons, in order:
//  1. Decoding is memory-bound: a step reads every KV byte once and does ~2 FLOPs per byte per
//     query row. DRAM bandwidth is reached only while every SM holds resident CTAs streaming keys.
//     Without a split there are base_ctas = batch x heads_kv x row blocks CTAs; `slots` =
//     sm_count x CTAs resident per SM (the kernel's occupancy) run at once.
//  2. Waves: n equal CTAs run in ceil(n / slots) waves and the last one leaves slots idle;
//     efficiency(s) = n s / (ceil(n s / slots) slots) is the fraction of the slot-time doing work.
//     Batch 1 x 8 kv heads fills 8 of ~260-400 slots: splitting fills them.
//  3. A split is not free: its partial output (head_dim + 1 floats per query row) is written and
//     read again by the combine kernel, and every CTA pays a pipeline fill (one tile's latency)
//     before it streams. So a split reads at least kMinTilesPerSplit tiles, and there are at most
//     kMaxSplits (the combine keeps one weight per split). Measured (docs/kvcache.md, v2): batch 1,
//     8k keys in 128 tiles: 45 splits of ~3 tiles 25.6 us, 32 of 4 tiles 23.1 us, 64 of 2 tiles
//     32.7 us: below 4 tiles a CTA's fill latency dominates, hence 4.
//  4. Tiles are whole: a split of `tiles` reads ceil(tiles / s) of them on its critical path, so
//     efficiency(s) also counts tiles / (s ceil(tiles / s)). Without it, batch 1 at 8k keys (128
//     tiles, 264 slots) took 29 splits, of which some read 5 tiles and the rest 4: the step lasted
//     as long as 5 tiles a split, not the 4.4 the slot count promised (session 9, docs/kvcache.md).
// The choice: the smallest s within 90% of the best efficiency over s in [1, s_max]; the smallest,
// because more splits than needed only add combine traffic and fills.
#pragma once

#include <algorithm>

namespace flashcore::cuda {

inline constexpr int kMinTilesPerSplit = 4;
inline constexpr int kMaxSplits = 128;

// max_splits: kMaxSplits, or fewer where a kernel's merge needs it (sm90's cluster merge: one
// cluster of at most 16 CTAs holds all of a sequence's splits).
inline int choose_decode_splits(long long base_ctas, long long tiles_per_sequence, int sm_count, int ctas_per_sm,
                                int max_splits = kMaxSplits) {
  const long long slots = static_cast<long long>(std::max(sm_count, 1)) * std::max(ctas_per_sm, 1);
  const long long s_max = std::min<long long>(std::clamp(max_splits, 1, kMaxSplits),
                                              std::max<long long>(1, tiles_per_sequence / kMinTilesPerSplit));
  if (base_ctas <= 0 || s_max <= 1) return 1;
  const long long tiles = std::max<long long>(tiles_per_sequence, 1);
  const auto efficiency = [&](long long s) {
    const long long n = base_ctas * s;
    const long long waves = (n + slots - 1) / slots;
    const long long longest_split = (tiles + s - 1) / s;
    return static_cast<double>(n) / static_cast<double>(waves * slots) *
           static_cast<double>(tiles) / static_cast<double>(s * longest_split);
  };
  double best = 0.0;
  for (long long s = 1; s <= s_max; ++s) best = std::max(best, efficiency(s));
  for (long long s = 1; s <= s_max; ++s)
    if (efficiency(s) >= 0.9 * best) return static_cast<int>(s);
  return 1;
}

// sm90's cluster decode without a fallback (kernels=sm90, FLASHCORE_DECODE_CLUSTER=on): the split
// count to launch when a cluster of `num_splits` CTAs may not fit one GPC. `resident(size)` returns
// how many clusters of `size` CTAs the GPU holds at once (or a negative number: the query failed);
// the count halves until one cluster fits, since any count gives the same result and one that
// cannot be placed would fail at launch after the append wrote the cache. Returns 0 when not even
// one CTA fits, the negative answer when a query failed.
template <class Resident>
int cluster_splits_that_fit(int num_splits, Resident&& resident) {
  for (int size = std::max(num_splits, 1);; size /= 2) {
    const int clusters = resident(size);
    if (clusters != 0) return clusters < 0 ? clusters : size;
    if (size == 1) return 0;
  }
}

}  // namespace flashcore::cuda
