// The sm90 backward's causal grid orders (src/cuda/sm90/bwd_tile_order.h: the d256 L2 sections,
// the d128 tail), checked on the host:
// the L2 section rule's choices at the benched shapes, and that the launch-index remap is a
// bijection onto (key block, kv head and rank, batch) that keeps a cluster's CTAs on one key block
// and unit, keeps their ranks, and runs key blocks in order inside each section.
#include <set>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "cuda/sm90/bwd_tile_order.h"

namespace {

using flashcore::cuda::sm90::bwd_l2_section_units;
using flashcore::cuda::sm90::bwd_tile_in_l2_sections;
using flashcore::cuda::sm90::bwd_tail_units;
using flashcore::cuda::sm90::bwd_tile_tail_longest_first;
using flashcore::cuda::sm90::BwdTileCoord;

TEST(BwdTileOrder, L2SectionRuleAtTheBenchedShapes) {
  // d256 bf16, 16k tokens, 8 query heads: units = batch * heads_kv.
  EXPECT_EQ(bwd_l2_section_units(true, 64, 1, 2048, 256, 2), 8);   // MHA 2k b8: 4 MB a unit
  EXPECT_EQ(bwd_l2_section_units(true, 32, 1, 4096, 256, 2), 4);   // MHA 4k b4
  EXPECT_EQ(bwd_l2_section_units(true, 16, 1, 8192, 256, 2), 2);   // MHA 8k b2
  EXPECT_EQ(bwd_l2_section_units(true, 8, 1, 16384, 256, 2), 1);   // MHA 16k b1: the grid's order
  EXPECT_EQ(bwd_l2_section_units(true, 16, 4, 2048, 256, 2), 2);   // GQA 4:1 2k b8
  EXPECT_EQ(bwd_l2_section_units(true, 8, 8, 2048, 256, 2), 1);    // GQA 8:1 2k b8: 32 MB a unit
  EXPECT_EQ(bwd_l2_section_units(false, 64, 1, 2048, 256, 2), 0);  // non-causal: never reordered
  EXPECT_EQ(bwd_l2_section_units(true, 1, 1, 2048, 256, 2), 0);    // one unit: nothing to order
  EXPECT_EQ(bwd_l2_section_units(true, 3, 1, 128, 256, 2), 2);     // never more than the units
}

TEST(BwdTileOrder, RemapIsABijectionThatKeepsClustersTogether) {
  for (const int n_blocks : {1, 2, 5, 32}) {
    for (const int heads_kv : {1, 2, 3}) {
      for (const int splits : {1, 2, 4}) {
        for (const int batch : {1, 2, 3}) {
          const int units = heads_kv * batch;
          for (const int section : {1, 2, 3, 4, 8, 64}) {
            const int gx = n_blocks, gy = heads_kv * splits, gz = batch;
            std::set<std::tuple<int, int, int>> seen;
            std::vector<int> last_block(units, -1);
            // Clusters in launch order (x fastest, then the kv head, then batch); the ranks inside.
            for (int bz = 0; bz < gz; ++bz) {
              for (int head = 0; head < heads_kv; ++head) {
                for (int bx = 0; bx < gx; ++bx) {
                  const BwdTileCoord first =
                      bwd_tile_in_l2_sections(bx, head * splits, bz, gx, gy, gz, section, splits);
                  for (int rank = 0; rank < splits; ++rank) {
                    const BwdTileCoord c = bwd_tile_in_l2_sections(bx, head * splits + rank, bz, gx, gy, gz, section, splits);
                    ASSERT_GE(c.n_block, 0);
                    ASSERT_LT(c.n_block, n_blocks);
                    ASSERT_GE(c.batch, 0);
                    ASSERT_LT(c.batch, batch);
                    ASSERT_EQ(c.y % splits, rank) << "a CTA keeps its rank in the cluster";
                    ASSERT_EQ(c.n_block, first.n_block) << "a cluster's CTAs share the key block";
                    ASSERT_EQ(c.y / splits, first.y / splits) << "and the kv head";
                    ASSERT_EQ(c.batch, first.batch) << "and the batch";
                    ASSERT_TRUE(seen.emplace(c.n_block, c.y, c.batch).second) << "a tile taken twice";
                  }
                  // Inside a section key blocks run in order: a unit's blocks come longest first.
                  const int unit = first.batch * heads_kv + first.y / splits;
                  ASSERT_GT(first.n_block, last_block[unit]);
                  last_block[unit] = first.n_block;
                }
              }
            }
            EXPECT_EQ(int(seen.size()), n_blocks * heads_kv * splits * batch)
                << "n_blocks " << n_blocks << " heads_kv " << heads_kv << " splits " << splits << " batch " << batch
                << " section " << section;
          }
        }
      }
    }
  }
}

TEST(BwdTileOrder, KeyBlockMajorInsideASection) {
  // 4 units of 3 key blocks, sections of 2: launches 0-5 are section 0 (units 0, 1), 6-11 section 1.
  const int expected_block[12] = {0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2};
  const int expected_unit[12] = {0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3};
  for (int launch = 0; launch < 12; ++launch) {
    const int bx = launch % 3, head = (launch / 3) % 2, bz = launch / 6;  // grid (3, 2 kv heads, 2 batches)
    const BwdTileCoord c = bwd_tile_in_l2_sections(bx, head, bz, 3, 2, 2, 2, 1);
    EXPECT_EQ(c.n_block, expected_block[launch]) << "launch " << launch;
    EXPECT_EQ(c.batch * 2 + c.y, expected_unit[launch]) << "launch " << launch;
  }
}

TEST(BwdTileOrder, TailUnitsAtTheBenchedShapes) {
  // bf16 d128, 16k tokens, 16 query heads, 132 SMs: units = heads_kv * batch, 128-key blocks.
  EXPECT_EQ(bwd_tail_units(32, 64, 1, 8192, 128, 2, 132, 1), 4);    // MHA 8k b2: 4 MB a unit (L2 rule)
  EXPECT_EQ(bwd_tail_units(64, 32, 1, 4096, 128, 2, 132, 1), 8);    // MHA 4k b4
  EXPECT_EQ(bwd_tail_units(128, 16, 1, 2048, 128, 2, 132, 1), 16);  // MHA 2k b8
  EXPECT_EQ(bwd_tail_units(8, 32, 4, 4096, 128, 2, 132, 2), 2);     // GQA 8:1 4k b4, 2 CTAs a group
  EXPECT_EQ(bwd_tail_units(16, 16, 4, 2048, 128, 2, 132, 2), 4);    // GQA 8:1 2k b8: 13 by waves, 4 by L2
  EXPECT_EQ(bwd_tail_units(3, 1, 1, 128, 128, 2, 132, 1), 3);       // never more than the units
  EXPECT_EQ(bwd_tail_units(4, 8, 8, 65536, 128, 2, 132, 1), 1);     // at least one
  EXPECT_EQ(bwd_tail_units(0, 8, 1, 128, 128, 2, 132, 1), 0);       // an empty grid
}

// The d <= 128 kernels' causal tail order (Traits::kTailLongestFirst): a bijection that keeps clusters
// together and their ranks, leaves the units before the tail in the grid's own order, and runs the
// tail's key blocks in order across its units.
TEST(BwdTileOrder, TailLongestFirstIsABijectionThatLeavesTheHeadAlone) {
  for (const int n_blocks : {1, 2, 5, 16}) {
    for (const int heads_kv : {1, 2, 3}) {
      for (const int splits : {1, 2, 4}) {
        for (const int batch : {1, 2, 3}) {
          const int units = heads_kv * batch;
          for (const int tail : {0, 1, 2, 3, 5, 100}) {
            const int gx = n_blocks, gy = heads_kv * splits, gz = batch;
            const int tail_units = tail < 1 ? 1 : (tail > units ? units : tail);
            std::set<std::tuple<int, int, int>> seen;
            int launch = 0;
            for (int bz = 0; bz < gz; ++bz) {
              for (int head = 0; head < heads_kv; ++head) {
                for (int bx = 0; bx < gx; ++bx, ++launch) {
                  const BwdTileCoord first = bwd_tile_tail_longest_first(bx, head * splits, bz, gx, gy, gz, tail, splits);
                  const int unit = first.batch * heads_kv + first.y / splits;
                  if (launch < (units - tail_units) * n_blocks) {
                    ASSERT_EQ(first.n_block, bx) << "before the tail: the grid's own order";
                    ASSERT_EQ(unit, bz * heads_kv + head);
                  } else {
                    const int within = launch - (units - tail_units) * n_blocks;
                    ASSERT_EQ(first.n_block, within / tail_units) << "the tail: key block major";
                    ASSERT_EQ(unit, units - tail_units + within % tail_units);
                  }
                  for (int rank = 0; rank < splits; ++rank) {
                    const BwdTileCoord c =
                        bwd_tile_tail_longest_first(bx, head * splits + rank, bz, gx, gy, gz, tail, splits);
                    ASSERT_EQ(c.y % splits, rank) << "a CTA keeps its rank in the cluster";
                    ASSERT_EQ(c.n_block, first.n_block);
                    ASSERT_EQ(c.y / splits, first.y / splits);
                    ASSERT_EQ(c.batch, first.batch);
                    ASSERT_TRUE(seen.emplace(c.n_block, c.y, c.batch).second) << "a tile taken twice";
                  }
                }
              }
            }
            EXPECT_EQ(int(seen.size()), n_blocks * heads_kv * splits * batch);
          }
        }
      }
    }
  }
}

}  // namespace
