// Tile shape of the FP32-FMA decode kernel (decode_kernel.h) for one (dtype, head dim, packed rows);
// launched with 4 rows (decode_launch_template.h).
//
// 128 threads. kLanesPerRow threads share one key row, 8 columns (16 bytes) each; the CTA's
// kGroups key groups each own every kGroups-th key of a tile and keep an online softmax of their
// own (like splits inside the CTA), merged once at the end. Each thread cp.async-copies exactly the
// 16-byte chunks it later reads, so the pipeline needs no barrier; shared memory only lets the
// loads run ahead of the math without holding registers.
// For 4 packed rows (8 keys per group a tile):
//   head dim   lanes/row  groups  keys/tile  tile bytes (K + V)  2 stages
//      64          8        16       128         32 KB             64 KB
//     128         16         8        64         32 KB             64 KB
//     256         32         4        32         32 KB             64 KB
// 64 KB a CTA: 3 CTAs per SM on H100 (228 KB), 2 on A100 (164 KB); ~32 KB in flight per CTA is
// more than the ~25 KB per SM that Little's law asks of HBM3 (3.35 TB/s x ~1 us / 132 SMs).
#pragma once

#include <algorithm>

namespace flashcore::cuda::sm80 {

template <typename Element_, int kHeadDim_, int kRows_>
struct DecodeTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  // Packed query rows (query heads of one kv head x query positions) a CTA serves; more rows run
  // as more row blocks, each reading the keys again.
  static constexpr int kRows = kRows_;
  static constexpr int kThreads = 128;
  static constexpr int kColsPerThread = 8;  // one 16-byte vector
  static constexpr int kLanesPerRow = kHeadDim / kColsPerThread;
  static constexpr int kGroups = kThreads / kLanesPerRow;
  // Scores held per thread per tile: kKeysPerGroup x kRows = 32 registers.
  static constexpr int kKeysPerGroup = 8;
  static constexpr int kBlockN = kGroups * kKeysPerGroup;
  static constexpr int kStages = 2;
  static constexpr int kTileElems = kBlockN * kHeadDim;  // one of K or V
  static constexpr int kPipelineBytes = kStages * 2 * kTileElems * static_cast<int>(sizeof(Element));
  // The end-of-kernel merge: each group's partial output and (max, sum) per row, in fp32.
  static constexpr int kMergeBytes = kGroups * kRows * (kHeadDim + 2) * 4;
  static constexpr int kSmemBytes = std::max(kPipelineBytes, kMergeBytes);
  static_assert(kHeadDim % 8 == 0 && kThreads % kLanesPerRow == 0 && kLanesPerRow <= 32, "head dim 8..256");
};

}  // namespace flashcore::cuda::sm80
