// The decode kernels' split heuristic (src/cuda/common/decode_splits.h), host code tested without
// a GPU: the cases its comment reasons about.
#include <gtest/gtest.h>

#include "cuda/common/decode_splits.h"

namespace flashcore::cuda {
namespace {

constexpr int kSms = 132;  // H100 SXM
constexpr int kPerSm = 2;  // the 3-stage d128 tensor-core kernel's occupancy (100 KB of shared memory)

double efficiency(long long base, int s) {
  const long long slots = kSms * kPerSm;
  const long long n = base * s;
  return static_cast<double>(n) / static_cast<double>((n + slots - 1) / slots * slots);
}

TEST(DecodeSplits, FillsTheGpuWhenOneSequenceCannot) {
  // Batch 1 x 8 kv heads, 8k keys in 64-key tiles: 8 CTAs would use 3% of the slots. The H100's
  // best measured count was 32 (4 tiles a split).
  const int s = choose_decode_splits(8, 128, kSms, kPerSm);
  EXPECT_GE(s, 24);
  EXPECT_GE(efficiency(8, s), 0.85);
  EXPECT_LE(s, 128 / kMinTilesPerSplit);
}

TEST(DecodeSplits, SplitsGetEqualWholeTiles) {
  // 128 tiles: 29 splits fill 88% of the slots but some read 5 tiles, the rest 4; 32 read 4 each.
  EXPECT_EQ(choose_decode_splits(8, 128, kSms, kPerSm), 32);
  // One CTA a SM (a deeper pipeline): 16 splits of 8 tiles on 132 slots, not 15 of 8 or 9.
  EXPECT_EQ(choose_decode_splits(8, 128, kSms, 1), 16);
}

TEST(DecodeSplits, NoSplitWhenTheGridIsFullAndEven) {
  EXPECT_EQ(choose_decode_splits(kSms * kPerSm * 4, 128, kSms, kPerSm), 1);
}

TEST(DecodeSplits, SplitsToEvenOutALastWave) {
  // Batch 64 x 8 kv heads = 512 CTAs on 264 slots: 1.94 waves of work in 2, efficiency 0.97 already.
  EXPECT_EQ(choose_decode_splits(512, 128, kSms, kPerSm), 1);
  // 300 CTAs on 264 slots: 57% efficient unsplit; a split must do better.
  const int s = choose_decode_splits(300, 128, kSms, kPerSm);
  EXPECT_GT(s, 1);
  EXPECT_GE(efficiency(300, s), 0.85);
}

TEST(DecodeSplits, ShortSequencesAreNotSplit) {
  EXPECT_EQ(choose_decode_splits(1, 1, kSms, kPerSm), 1);
  EXPECT_EQ(choose_decode_splits(1, 7, kSms, kPerSm), 1);  // fewer than 4 tiles a split
  EXPECT_LE(choose_decode_splits(1, 100000, kSms, kPerSm), kMaxSplits);
}

TEST(DecodeSplits, ClusterKernelCapsTheSplits) {
  // sm90's cluster kernel (8 warps, 128-key tiles, one CTA a SM) merges a sequence's splits in one
  // cluster of at most 16 CTAs. Batch 1 x 8 kv heads, 8k keys = 64 tiles: 16 splits of 4 tiles,
  // 128 CTAs on 132 SMs. Batch 8: 64 CTAs, 2 splits. Batch 64: 512 CTAs, no split.
  EXPECT_EQ(choose_decode_splits(8, 64, kSms, 1, 16), 16);
  EXPECT_EQ(choose_decode_splits(64, 64, kSms, 1, 16), 2);
  EXPECT_EQ(choose_decode_splits(512, 64, kSms, 1, 16), 1);
  EXPECT_LE(choose_decode_splits(1, 100000, kSms, 1, 16), 16);
}

// sm90's cluster decode without a fallback: a cluster size no GPC can hold halves until one fits
// (review F2: decided before the append writes the cache).
TEST(DecodeSplits, ClusterSplitsHalveUntilOneClusterFits) {
  // An H100: 7 clusters of 16, more of every smaller size.
  const auto h100 = [](int size) { return size == 16 ? 7 : 132 / size; };
  EXPECT_EQ(cluster_splits_that_fit(16, h100), 16);
  EXPECT_EQ(cluster_splits_that_fit(13, h100), 13);
  // A GPC of 10 SMs (a MIG slice, say): 16 and 13 cannot be placed, 8 and 6 can.
  const auto small_gpc = [](int size) { return size > 10 ? 0 : 10 / size; };
  EXPECT_EQ(cluster_splits_that_fit(16, small_gpc), 8);
  EXPECT_EQ(cluster_splits_that_fit(13, small_gpc), 6);
  EXPECT_EQ(cluster_splits_that_fit(1, small_gpc), 1);
  // Not even one CTA fits: 0 (the launcher's NotSupported); a failed query: its negative answer.
  EXPECT_EQ(cluster_splits_that_fit(16, [](int) { return 0; }), 0);
  EXPECT_EQ(cluster_splits_that_fit(16, [](int size) { return size == 8 ? -1 : 0; }), -1);
  // Every size asked at most once, halving: 16, 8, 4, 2, 1.
  int asked = 0;
  EXPECT_EQ(cluster_splits_that_fit(16, [&](int) { return ++asked, 0; }), 0);
  EXPECT_EQ(asked, 5);
}

}  // namespace
}  // namespace flashcore::cuda
