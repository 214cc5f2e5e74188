// The CPU flash backend's extra memory: per worker a fixed set of tiles, plus (backward) one float
// per query row and head; never the seqlen_q x seqlen_k score matrix.
#include <cstddef>
#include <cstdint>

#include <gtest/gtest.h>

#include "api/problem.h"
#include "cpu/cpu_backend.h"

namespace flashcore::testing {
namespace {

detail::AttentionProblem problem_with_seqlen(std::int64_t seqlen) {
  detail::AttentionProblem p;
  p.batch = 2;
  p.seqlen_q = seqlen;
  p.seqlen_k = seqlen;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.head_dim = 128;
  return p;
}

TEST(Scratch, ForwardIsTilesPerWorkerWhateverTheSeqlen) {
  const std::size_t at_4k = cpu::flash_forward_scratch_bytes(problem_with_seqlen(4096), 4);
  EXPECT_EQ(cpu::flash_forward_scratch_bytes(problem_with_seqlen(32768), 4), at_4k);
  EXPECT_EQ(cpu::flash_forward_scratch_bytes(problem_with_seqlen(4096), 8), 2 * at_4k);
  EXPECT_LT(at_4k, std::size_t{4} << 20);  // a few (512, 128) float tiles per worker
}

// Two passes (more workers than (batch, kv head) pairs): the per-row deltas grow with seqlen.
TEST(Scratch, BackwardGrowsLinearlyWithSeqlen) {
  const std::size_t at_4k = cpu::flash_backward_scratch_bytes(problem_with_seqlen(4096), 8);
  const std::size_t at_8k = cpu::flash_backward_scratch_bytes(problem_with_seqlen(8192), 8);
  const std::size_t at_16k = cpu::flash_backward_scratch_bytes(problem_with_seqlen(16384), 8);
  EXPECT_EQ(at_16k - at_8k, 2 * (at_8k - at_4k));  // linear: the per-row deltas
  EXPECT_EQ(at_8k - at_4k, sizeof(float) * 2 * 8 * 4096);
}

// One pass (a (batch, kv head) pair per worker): each worker also keeps float dQ accumulators for
// its pair's query heads, (heads_q / heads_kv, seqlen_q, head_dim): still linear in seqlen.
TEST(Scratch, OnePassBackwardAddsDqAccumulatorsPerWorker) {
  const std::size_t at_4k = cpu::flash_backward_scratch_bytes(problem_with_seqlen(4096), 4);
  const std::size_t at_8k = cpu::flash_backward_scratch_bytes(problem_with_seqlen(8192), 4);
  EXPECT_EQ(at_8k - at_4k, sizeof(float) * 2 * 8 * 4096 + 4 * sizeof(float) * 4 * 4096 * 128);
}

}  // namespace
}  // namespace flashcore::testing
