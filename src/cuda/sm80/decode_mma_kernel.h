// The split-KV decode kernel on tensor cores (mma.sync m16n8k16, ldmatrix, cp.async: any sm80+
// GPU). Same contract as decode_kernel.h (the FP32-FMA version, kept as the reference variant:
// FLASHCORE_DECODE_KERNEL=fma); this one spends ~8x fewer instructions per key, so the loads, not
// the math, set its pace.
//
// One CTA serves one (split, kv head x row block, sequence); its 16 packed rows (the query heads
// sharing the kv head x the query positions, GQA packing: M of the MMA) read each key once. Each
// of the 4 warps takes 16 keys of every 64-key tile and runs the FlashAttention-2 warp loop on
// them alone: S = Q K^T (16 x 16), an online softmax on the accumulators, P (the accumulators
// rounded to the dtype, already in A-operand layout) times V. Each warp cp.async-loads its own
// keys, so the pipeline needs only __syncwarp; the warps merge in decode_epilogue.h.
//
// Shared memory rows are swizzled (16-byte chunk c of row r stored at chunk c ^ (r % 8)) so the
// 8 rows an ldmatrix reads at one column fall in 8 different bank groups.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include <cutlass/numeric_types.h>

#include "cuda/params.h"
#include "cuda/sm80/decode_epilogue.h"
#include "cuda/sm80/decode_schedule.h"

namespace flashcore::cuda::sm80 {

// kPageIdsByLane: for a paged cache, each lane of a warp finds one key's cache offsets (one
// block-table read and one division by the page size) and the warp shares them by shuffles, instead
// of every lane doing that for each of the 8 keys whose chunks it copies (docs/kvcache.md, v6).
// The rest are v7's experiments (docs/kvcache.md), measured on the H100 and left off by default;
// builds with FLASHCORE_DECODE_AB_VARIANTS time them against the default (decode_launch_template.h):
// kSChains: independent accumulators S = Q K^T is summed in over the head dim's k-steps (k-step ks
// into chain ks % kSChains), added before the softmax (a tile's dependent MMA chain 8 -> 4 at d128).
// kSchedule: which tiles a split reads (decode_schedule.h): kScheduleContiguous, or
// kScheduleStrided (split s: tiles s, s + S, ...; run_decode's choice for contiguous caches since v8), or kScheduleEarlyLoads (strided, and the first kStages - 1
// tiles' loads go out before cache_seqlens is read, where decode::early_loads_allowed says so).
// kMergeInFlight: 16-byte partial loads a lane of the split merge keeps in flight (decode_combine.h):
// 32 merges 32 splits in one L2 round trip, with 128 registers for them.
// kLoadsOnly: a diagnostic, wrong results: the tiles are loaded and waited for, no math.
// kPdlMerge: the kernel stores its partials only and lets a dependent
// merge kernel launch early (decode_combine.h, decode_merge_kernel).
// kLightCount: the split CTAs' arrival count orders their partial stores with one acq_rel atomic
// by thread 0 after the CTA barrier, not a __threadfence by every thread before it and another
// after it (decode_combine.h, merge_splits_in_last_cta; docs/kvcache.md, v8).
inline constexpr int kScheduleContiguous = 0;
inline constexpr int kScheduleStrided = 1;
inline constexpr int kScheduleEarlyLoads = 2;
// kWarps: warps a CTA, each streaming its 16 keys of every tile (kBlockN = 16 kWarps keys). 4 for the
// sm80 kernel (2-3 CTAs a SM); 8 for sm90's cluster kernel (sm90/decode_cluster_kernel.h: one CTA a
// SM, the same warps and bytes in flight a SM as two 4-warp CTAs, half the CTAs to merge).
template <typename Element_, int kHeadDim_, int kStages_ = 2, bool kPageIdsByLane_ = false, int kSChains_ = 1,
          int kSchedule_ = kScheduleContiguous, int kMergeInFlight_ = 16, bool kLoadsOnly_ = false,
          bool kPdlMerge_ = false, bool kLightCount_ = false, int kWarps_ = 4>
struct DecodeMmaTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr bool kPageIdsByLane = kPageIdsByLane_;
  static constexpr int kSChains = kSChains_;
  static constexpr int kSchedule = kSchedule_;
  static constexpr bool kEarlyLoads = kSchedule_ == kScheduleEarlyLoads;
  static constexpr bool kStrided = kSchedule_ != kScheduleContiguous;
  static constexpr int kMergeInFlight = kMergeInFlight_;
  static constexpr bool kLoadsOnly = kLoadsOnly_;
  static constexpr bool kPdlMerge = kPdlMerge_;
  static constexpr bool kLightCount = kLightCount_;
  static constexpr int kRows = 16;  // the MMA's M
  static constexpr int kWarps = kWarps_;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kWarpKeys = 16;  // one k-step of P V
  static constexpr int kBlockN = kWarps * kWarpKeys;
  static constexpr int kStages = kStages_;
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks in a row
  static constexpr int kWarpTileElems = kWarpKeys * kHeadDim;
  static constexpr int kQOffset = kStages * kWarps * 2 * kWarpTileElems;  // elements before sQ
  static constexpr int kPipelineBytes = (kQOffset + kRows * kHeadDim) * static_cast<int>(sizeof(Element));
  static constexpr int kMergeBytes = kWarps * kRows * (kHeadDim + 2) * 4;  // the warps' partials, after the mainloop
  static constexpr int kSmemBytes = std::max(kPipelineBytes, kMergeBytes);
  // CTAs a SM the shared memory allows at d128 (2 stages: 68 KB, 3; 3 stages: 100 KB, 2; 8 warps at
  // 3 stages: 200 KB, 1), asked of ptxas so the registers do not lower it: 3 CTAs of 128 threads
  // need <= 170 registers (v7's two S chains with early loads took the 2-stage kernel to 185
  // without it: 2 CTAs a SM).
  static constexpr int kMinCtasPerSm = kHeadDim > 128 || kWarps > 4 ? 1 : kStages <= 2 ? 3 : 2;
  static_assert(kHeadDim % 64 == 0, "the swizzle needs at least 8 chunks a row; 16-column MMA k-steps");
  static_assert(kWarpKeys <= 32, "one lane a key when the lanes share the page offsets");
  static_assert((kHeadDim / 16) % kSChains == 0, "whole k-steps a chain");
};

namespace decode_mma {

// Element offset of 16-byte chunk `chunk` of row `row` in a swizzled [rows][kHeadDim] tile.
template <int kHeadDim>
__device__ __forceinline__ int swizzled(int row, int chunk) {
  return row * kHeadDim + ((chunk ^ (row & 7)) << 3);
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* smem) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* smem) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// d (16 x 8, fp32) += a (16 x 16) b (16 x 8), in the dtype of Element.
template <typename Element>
__device__ __forceinline__ void mma_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                          std::uint32_t b1) {
  if constexpr (std::is_same_v<Element, cutlass::bfloat16_t>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two floats rounded to the dtype in one 32-bit register, the first in the low half.
template <typename Element>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
  std::uint32_t bits;
  if constexpr (std::is_same_v<Element, cutlass::bfloat16_t>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    bits = *reinterpret_cast<const std::uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    bits = *reinterpret_cast<const std::uint32_t*>(&v);
  }
  return bits;
}

}  // namespace decode_mma

// Which CTA this is: (split, kv head x row block, sequence) = (blockIdx.x, .y, .z).
struct DecodeCta {
  int split, num_splits;  // of the sequence's keys
  int hk;                 // kv head
  int row0;               // first packed row (query head of the group x query position)
  int b;                  // sequence
};

template <int kRows>
__device__ __forceinline__ DecodeCta decode_cta(const DecodeParams& p) {
  const int m_blocks = (p.group_size * p.seqlen_q + kRows - 1) / kRows;
  return {static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x), static_cast<int>(blockIdx.y) / m_blocks,
          static_cast<int>(blockIdx.y % m_blocks) * kRows, static_cast<int>(blockIdx.z)};
}

// The CTA's scheduler and mainloop up to the warps' partials: each warp leaves its rows' running
// max, sum and unnormalised output in shared memory, the layout decode_epilogue.h reads
// (merge_o at smem_raw, merge_ml after it), and the CTA is synchronised. The epilogue is the
// caller's: decode_mma_kernel below (sm80: output or global split merge) or sm90's cluster kernel.
template <class Traits>
__device__ __forceinline__ void decode_mma_mainloop(const DecodeParams& p, const DecodeCta& cta,
                                                    unsigned char* smem_raw) {
  using Element = typename Traits::Element;
  using namespace decode_mma;
  constexpr int kHeadDim = Traits::kHeadDim;
  constexpr int kRows = Traits::kRows;
  constexpr int kChunks = Traits::kChunks;
  constexpr int kWarpKeys = Traits::kWarpKeys;
  constexpr int kBlockN = Traits::kBlockN;
  Element* smem = reinterpret_cast<Element*>(smem_raw);
  Element* sQ = smem + Traits::kQOffset;  // (kRows, kHeadDim), swizzled

  const int split = cta.split;
  const int num_splits = cta.num_splits;
  const int rows_total = p.group_size * p.seqlen_q;
  const int hk = cta.hk;
  const int row0 = cta.row0;
  const int b = cta.b;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int group_id = lane / 4;  // the accumulator row this lane holds (and + 8)
  const int tig = lane % 4;       // thread in group: the accumulator column pair

  // ---- scheduler: which tiles this split reads (strided with early loads, decode_schedule.h) ----
  // With early loads the first kStages - 1 tiles' loads are issued for a sequence that fills the
  // cache, before schedule() reads cache_seqlens; keys past the real sequence are zeroed once they
  // land (below), tiles past it are never read.
  const bool early = Traits::kEarlyLoads && decode::early_loads_allowed(p);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The merge kernel behind this one may launch now: its CTAs wait in griddepcontrol.wait.
  if constexpr (Traits::kPdlMerge) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif

  // ---- mainloop: each warp streams its 16 keys of every tile through a kStages-deep pipeline ----
  const Element* k_base = static_cast<const Element*>(p.k_cache) + hk * p.k_cache_strides.head;
  const Element* v_base = static_cast<const Element*>(p.v_cache) + hk * p.v_cache_strides.head;
  const auto warp_stage = [&](int stage) { return smem + (stage * Traits::kWarps + warp) * 2 * Traits::kWarpTileElems; };
  const auto load_tile = [&](const decode::DecodeWork& lw, int tile, int stage) {
    Element* sk = warp_stage(stage);
    Element* sv = sk + Traits::kWarpTileElems;
    if constexpr (Traits::kPageIdsByLane) {
      if (p.block_table != nullptr) {
        // Lane n (and n + 16) finds key n's offsets; the lane copying a chunk of key n takes them by
        // shuffle. Key row n of the tile is chunk-copied by lanes with idx / kChunks == n.
        const int key0 = tile * kBlockN + warp * kWarpKeys;
        std::int64_t lane_k_off = 0, lane_v_off = 0;
        const bool lane_valid = decode::kv_offsets(p, lw, b, key0 + lane % kWarpKeys, &lane_k_off, &lane_v_off);
        const unsigned valid_keys = __ballot_sync(0xffffffffu, lane_valid);
#pragma unroll
        for (int idx = lane; idx < kWarpKeys * kChunks; idx += 32) {
          const int n = idx / kChunks;
          const int c = idx % kChunks;
          const std::int64_t k_off = __shfl_sync(0xffffffffu, lane_k_off, n);
          const std::int64_t v_off = __shfl_sync(0xffffffffu, lane_v_off, n);
          const bool valid = c * 8 < p.head_dim && ((valid_keys >> n) & 1u);
          decode::cp_async_16(sk + swizzled<kHeadDim>(n, c), valid ? k_base + k_off + c * 8 : k_base, valid);
          decode::cp_async_16(sv + swizzled<kHeadDim>(n, c), valid ? v_base + v_off + c * 8 : v_base, valid);
        }
        return;
      }
    }
#pragma unroll
    for (int idx = lane; idx < kWarpKeys * kChunks; idx += 32) {
      const int n = idx / kChunks;
      const int c = idx % kChunks;
      std::int64_t k_off = 0, v_off = 0;
      const bool valid =
          c * 8 < p.head_dim && decode::kv_offsets(p, lw, b, tile * kBlockN + warp * kWarpKeys + n, &k_off, &v_off);
      decode::cp_async_16(sk + swizzled<kHeadDim>(n, c), valid ? k_base + k_off + c * 8 : k_base, valid);
      decode::cp_async_16(sv + swizzled<kHeadDim>(n, c), valid ? v_base + v_off + c * 8 : v_base, valid);
    }
  };
  if (early) {
    const decode::DecodeWork spec = decode::speculative_work(p, b);
#pragma unroll
    for (int s = 0; s < Traits::kStages - 1; ++s) {
      load_tile(spec, split + s * num_splits, s);  // keys past the capacity: zero-filled, nothing read
      decode::cp_async_commit();
    }
  }
  const decode::DecodeWork w = decode::schedule<kBlockN, Traits::kStrided>(p, b, split, num_splits);
  const decode::ScoreRule rule = decode::score_rule(p, w);
  const int steps = w.tile_end > w.tile_begin ? (w.tile_end - w.tile_begin + w.tile_step - 1) / w.tile_step : 0;

  // Otherwise the first tiles' loads go out before q is prepared, so the two latencies overlap.
  if (!early) {
#pragma unroll
    for (int s = 0; s < Traits::kStages - 1; ++s) {
      if (s < steps) load_tile(w, w.tile_begin + s * w.tile_step, s);
      decode::cp_async_commit();
    }
  }
  // ---- q into shared memory: rotated, rounded to the dtype, zero past the rows and head_dim ----
  for (int idx = threadIdx.x; idx < kRows * kChunks; idx += Traits::kThreads) {
    const int r = idx / kChunks;
    const int c = idx % kChunks;
    float x[8];
    decode::load_q8<Element>(p, b, hk, row0 + r, c * 8, w.seqlen_end_cache_len, x);
    alignas(16) Element e8[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) e8[e] = static_cast<Element>(x[e]);
    *reinterpret_cast<uint4*>(sQ + swizzled<kHeadDim>(r, c)) = *reinterpret_cast<const uint4*>(e8);
  }
  float slope[2];
  int query_pos[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = min(row0 + group_id + 8 * h, rows_total - 1);
    query_pos[h] = r % p.seqlen_q;
    slope[h] = p.alibi_slopes == nullptr
                   ? 0.0f
                   : p.alibi_slopes[b * p.alibi_batch_stride + hk * p.group_size + r / p.seqlen_q];
  }
  __syncthreads();

  float o[kChunks][4];  // (16 rows, kHeadDim): chunk nd holds columns nd*8 + tig*2 + {0,1} of rows group_id, +8
#pragma unroll
  for (int nd = 0; nd < kChunks; ++nd)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[nd][e] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};  // this lane's share; summed over the row's 4 lanes at the end

  for (int step = 0; step < steps; ++step) {
    const int tile = w.tile_begin + step * w.tile_step;
    const int ahead = step + Traits::kStages - 1;
    __syncwarp();  // every lane is done reading the stage `ahead` reuses
    if (ahead < steps) load_tile(w, w.tile_begin + ahead * w.tile_step, ahead % Traits::kStages);
    decode::cp_async_commit();
    decode::cp_async_wait<Traits::kStages - 1>();
    Element* sk = warp_stage(step % Traits::kStages);
    Element* sv = sk + Traits::kWarpTileElems;
    if (early && step < Traits::kStages - 1 && (tile + 1) * kBlockN > w.seqlen_k) {
      // An early tile read keys up to the capacity: zero the keys past the sequence (this lane's own
      // chunks, landed by the wait above), V too, as 0 x NaN in a fresh cache would be NaN.
#pragma unroll
      for (int idx = lane; idx < kWarpKeys * kChunks; idx += 32) {
        const int n = idx / kChunks;
        if (tile * kBlockN + warp * kWarpKeys + n >= w.seqlen_k) {
          *reinterpret_cast<uint4*>(sk + swizzled<kHeadDim>(n, idx % kChunks)) = make_uint4(0, 0, 0, 0);
          *reinterpret_cast<uint4*>(sv + swizzled<kHeadDim>(n, idx % kChunks)) = make_uint4(0, 0, 0, 0);
        }
      }
    }
    __syncwarp();  // the warp's chunks of `tile` are visible to every lane
    if constexpr (Traits::kLoadsOnly) continue;

    // S = Q K^T: 16 rows x 16 keys (two n-tiles of 8), k-steps of 16 columns, in kSChains
    // independent accumulator chains summed before the softmax.
    float sc[Traits::kSChains][2][4] = {};
#pragma unroll
    for (int ks = 0; ks < kHeadDim / 16; ++ks) {
      std::uint32_t a[4], bk[4];
      ldmatrix_x4(a, sQ + swizzled<kHeadDim>((lane % 8) + ((lane / 8) & 1) * 8, 2 * ks + lane / 16));
      ldmatrix_x4(bk, sk + swizzled<kHeadDim>((lane % 8) + (lane / 16) * 8, 2 * ks + ((lane / 8) & 1)));
      mma_16816<Element>(sc[ks % Traits::kSChains][0], a, bk[0], bk[1]);
      mma_16816<Element>(sc[ks % Traits::kSChains][1], a, bk[2], bk[3]);
    }
    float s[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nt][e] = sc[0][nt][e];
#pragma unroll
        for (int chain = 1; chain < Traits::kSChains; ++chain) s[nt][e] += sc[chain][nt][e];
      }
    // Scale, score options and the mask (log2 units); whole-visible 16-key blocks skip the mask.
    const int n0 = tile * kBlockN + warp * kWarpKeys;
    const bool needs_mask = n0 < w.lo_all || n0 + kWarpKeys > w.hi_all;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[nt][e] = rule(s[nt][e], query_pos[e / 2], n0 + nt * 8 + tig * 2 + (e & 1), slope[e / 2], needs_mask);
    // Online softmax of rows group_id (h = 0) and group_id + 8 (h = 1) over this warp's keys.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = fmaxf(fmaxf(s[0][2 * h], s[0][2 * h + 1]), fmaxf(s[1][2 * h], s[1][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float new_max = fmaxf(row_max[h], mx);
      const float base = new_max == -INFINITY ? 0.0f : new_max;  // all masked so far: exp2 gives 0, not NaN
      const float rescale = exp2f(row_max[h] - base);
      row_max[h] = new_max;
      row_sum[h] *= rescale;
#pragma unroll
      for (int nd = 0; nd < kChunks; ++nd) {
        o[nd][2 * h] *= rescale;
        o[nd][2 * h + 1] *= rescale;
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          s[nt][e] = exp2f(s[nt][e] - base);
          row_sum[h] += s[nt][e];
        }
    }
    // O += P V: P's accumulators are already the A operand's layout (keys 0..7, then 8..15).
    const std::uint32_t pa[4] = {pack2<Element>(s[0][0], s[0][1]), pack2<Element>(s[0][2], s[0][3]),
                                 pack2<Element>(s[1][0], s[1][1]), pack2<Element>(s[1][2], s[1][3])};
#pragma unroll
    for (int nd = 0; nd < kChunks; nd += 2) {
      std::uint32_t bv[4];
      ldmatrix_x4_trans(bv, sv + swizzled<kHeadDim>((lane % 8) + ((lane / 8) & 1) * 8, nd + lane / 16));
      mma_16816<Element>(o[nd], pa, bv[0], bv[1]);
      mma_16816<Element>(o[nd + 1], pa, bv[2], bv[3]);
    }
  }
  decode::cp_async_wait<0>();
  __syncthreads();  // every warp is done with the pipeline's and q's shared memory

  // ---- epilogue: each warp's partial (max, sum, unnormalised output) to shared memory, merged ----
  float* merge_o = reinterpret_cast<float*>(smem_raw);    // (kWarps, kRows, kHeadDim)
  float* merge_ml = merge_o + Traits::kWarps * kRows * kHeadDim;  // (kWarps, kRows, 2)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
    const int r = group_id + 8 * h;
    if (row0 + r >= rows_total) continue;  // padding rows (12 of the 16 at GQA 4): decode_epilogue skips them
#pragma unroll
    for (int nd = 0; nd < kChunks; ++nd) {
      float* dst = merge_o + (warp * kRows + r) * kHeadDim + nd * 8 + tig * 2;
      dst[0] = o[nd][2 * h];
      dst[1] = o[nd][2 * h + 1];
    }
    if (tig == 0) {
      merge_ml[(warp * kRows + r) * 2] = row_max[h];
      merge_ml[(warp * kRows + r) * 2 + 1] = row_sum[h];
    }
  }
  __syncthreads();
}

template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinCtasPerSm) decode_mma_kernel(const __grid_constant__ DecodeParams p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const DecodeCta cta = decode_cta<Traits::kRows>(p);
  decode_mma_mainloop<Traits>(p, cta, smem_raw);
  const float* merge_o = reinterpret_cast<const float*>(smem_raw);  // (kWarps, kRows, kHeadDim)
  const float* merge_ml = merge_o + Traits::kWarps * Traits::kRows * Traits::kHeadDim;  // (kWarps, kRows, 2)
  decode_epilogue<typename Traits::Element, Traits::kHeadDim, Traits::kRows, Traits::kWarps, Traits::kThreads,
                  Traits::kMergeInFlight, Traits::kLightCount>(p, merge_o, merge_ml, cta.b, cta.hk, cta.row0, cta.split,
                                                               cta.num_splits);
}

}  // namespace flashcore::cuda::sm80
