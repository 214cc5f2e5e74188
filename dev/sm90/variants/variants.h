// Dev-only A/B variants of the sm90 forward (tile shapes, schedulers) for bench runs; each is
// defined in its own TU so they compile in parallel. Not part of the library.
#pragma once

#include <cuda_runtime.h>

#include "cuda/params.h"
#include "flashcore/tensor.h"

flashcore::Status run_variant_d128_n176(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_d256_pp(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_d128_causal_persistent(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_d64_3wg(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_d128_3stage(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_d64_3stage(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_zigzag_d64(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_zigzag_d128(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_zigzag_d256(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_d64_causal_onetile(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_v7_d64_bf16_v6b(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_v7_d64_fp16_v6b(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_v7_d64_bf16_exp4(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_v7_d64_bf16_128(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_v7_d64_bf16_3st(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_s8_d64_bf16_2st(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_s8_d128_bf16_cluster(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_s8_d256_bf16_cluster(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_s8_d128_fp16_cluster(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_s8_d256_fp16_cluster(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_s9_d256_bf16_prefetch(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_s9_d256_fp16_prefetch(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_s9_d128_bf16_prefetch(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_s9_d128_fp16_prefetch(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_s9_d256_bf16_base(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_s9_d256_bf16_n64(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_s10_d128_bf16_timed(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_s10_d256_bf16_timed(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_s10_d128_bf16_plain(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_s10_d128_bf16_timed_vec16(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_s10_d256_bf16_timed_vec16(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_v12_d128_bf16_4b(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_v13_d256_bf16_16b(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_v13_lib_d256_bf16(const flashcore::cuda::FwdParams& p, cudaStream_t s);
flashcore::Status run_variant_v13_d64_fp16_16b(const flashcore::cuda::FwdParams& p, cudaStream_t s);

// 0: bf16 d128 128x176 ping-pong; 1: bf16 d256 128x80 ping-pong; 2: bf16 d128 causal persistent
// LPT (non-causal as main); 3: bf16 d64 192x128, 3 consumer warpgroups, ping-pong;
// 4: bf16 d128 128x128 with 3 K/V stages; 5: bf16 d64 128x128 with 3 K/V stages;
// 6/7/8: bf16 d64/d128/d256 causal with the persistent zig-zag scheduler (main tiles), non-causal
// as main; 9 (v6): bf16 d64 causal one tile per CTA on the v6 main tile.
// v7 (d64, causal and not, each launched as the main tile): 10 bf16 and 11 fp16 as v6b shipped
// them (every exponential on MUFU), 12 bf16 with 1 exponential in 4 on the FMA pipe, 13 bf16
// 128 x 128 with two Q buffers and 14 bf16 192 x 128 with 3 K/V stages (13, 14: 1 in 8 on the
// FMA pipe, as the library).
// s8: 15 bf16 d64 with 2 K/V stages (v7b's tile, A/B against v8's 3-stage build; the library's
// tile again after v8); 16/17 bf16 d128/d256 and
// 18/19 fp16 d128/d256 non-causal in clusters of 2 CTAs sharing K/V by TMA multicast (non-causal only).
// s9: the next tile's Q prefetched into L2 during this one (one Q buffer), causal and not: 20/21
// bf16/fp16 d256 (the library's tile), 22/23 bf16/fp16 d128 (non-causal up to 4k keys 128 x 128
// with 3 stages and one Q buffer instead of the short-keys tile; causal the library's tile).
// s9, second call (a harness of variants only): 24 bf16 d256 as shipped before s9 (no prefetch),
// 25 bf16 d256 with 64-key blocks (+ prefetch); causal through the zig-zag grid only.
// s10 (issue 14, one call): 20 and 25 again for the rotated A/B; 26/27 bf16 d128/d256 non-causal
// (the library's 2k tiles) with %globaltimer stamps per CTA (s10_timeline.h), 28 d128's plain twin.
// FC_SM90_VARIANTS_11: 29/30 = 26/27 with 16-byte O stores (s10_epilogue_vec16.h).
// FC_SM90_VARIANTS_12 (v11, session 10: the epilogue): 20, 26-30 as above (31-33, O through Q's
// buffer and TMA stores, were removed with that epilogue in v13; git history has v11_epilogue_tma.cu).
// FC_SM90_VARIANTS_13 (v12, session 10: the wider O stores shipped): 20 (d256 with 4-byte stores,
// causal and not) and 34 bf16 d128 with 4-byte stores, causal and not (v12_d128_bf16_4b.cu).
// FC_SM90_VARIANTS_14 (v13, session 11: d256 O store widths): 20 (4-byte stores) and 35 (bf16 d256,
// causal and not, 16-byte stores; v13_d256_bf16_16b.cu) beside the library's 8, and 36 the library's
// bf16 d256 entry itself (its TU linked in; for a harness whose --lib part is fp16 only); 37 fp16 d64,
// the library's main tile with 16-byte O stores (v13_d64_fp16_16b.cu).
// Each build defines the FC_SM90_VARIANTS_* groups whose TUs it links.
inline flashcore::Status run_variant(int v, const flashcore::cuda::FwdParams& p, cudaStream_t s) {
  switch (v) {
#ifdef FC_SM90_VARIANTS_1
    case 0: return run_variant_d128_n176(p, s);
    case 1: return run_variant_d256_pp(p, s);
    case 2: return run_variant_d128_causal_persistent(p, s);
    case 3: return run_variant_d64_3wg(p, s);
#endif
#ifdef FC_SM90_VARIANTS_2
    case 4: return run_variant_d128_3stage(p, s);
    case 5: return run_variant_d64_3stage(p, s);
#endif
#ifdef FC_SM90_VARIANTS_3
    case 6: return run_variant_zigzag_d64(p, s);
    case 7: return run_variant_zigzag_d128(p, s);
    case 8: return run_variant_zigzag_d256(p, s);
#endif
#ifdef FC_SM90_VARIANTS_4
    case 9: return run_variant_d64_causal_onetile(p, s);
#endif
#ifdef FC_SM90_VARIANTS_5
    case 10: return run_variant_v7_d64_bf16_v6b(p, s);
    case 11: return run_variant_v7_d64_fp16_v6b(p, s);
    case 12: return run_variant_v7_d64_bf16_exp4(p, s);
    case 13: return run_variant_v7_d64_bf16_128(p, s);
    case 14: return run_variant_v7_d64_bf16_3st(p, s);
#endif
#ifdef FC_SM90_VARIANTS_6
    case 15: return run_variant_s8_d64_bf16_2st(p, s);
    case 16: return run_variant_s8_d128_bf16_cluster(p, s);
    case 17: return run_variant_s8_d256_bf16_cluster(p, s);
    case 18: return run_variant_s8_d128_fp16_cluster(p, s);
    case 19: return run_variant_s8_d256_fp16_cluster(p, s);
#endif
#if defined(FC_SM90_VARIANTS_7) || defined(FC_SM90_VARIANTS_8) || defined(FC_SM90_VARIANTS_10) || \
    defined(FC_SM90_VARIANTS_12) || defined(FC_SM90_VARIANTS_13) || defined(FC_SM90_VARIANTS_14)
    case 20: return run_variant_s9_d256_bf16_prefetch(p, s);
#endif
#ifdef FC_SM90_VARIANTS_7
    case 21: return run_variant_s9_d256_fp16_prefetch(p, s);
    case 22: return run_variant_s9_d128_bf16_prefetch(p, s);
    case 23: return run_variant_s9_d128_fp16_prefetch(p, s);
#endif
#ifdef FC_SM90_VARIANTS_8
    case 24: return run_variant_s9_d256_bf16_base(p, s);
#endif
#if defined(FC_SM90_VARIANTS_8) || defined(FC_SM90_VARIANTS_10)
    case 25: return run_variant_s9_d256_bf16_n64(p, s);
#endif
#if defined(FC_SM90_VARIANTS_10) || defined(FC_SM90_VARIANTS_12)
    case 26: return run_variant_s10_d128_bf16_timed(p, s);
    case 27: return run_variant_s10_d256_bf16_timed(p, s);
    case 28: return run_variant_s10_d128_bf16_plain(p, s);
#endif
#if defined(FC_SM90_VARIANTS_11) || defined(FC_SM90_VARIANTS_12)
    case 29: return run_variant_s10_d128_bf16_timed_vec16(p, s);
    case 30: return run_variant_s10_d256_bf16_timed_vec16(p, s);
#endif
#ifdef FC_SM90_VARIANTS_13
    case 34: return run_variant_v12_d128_bf16_4b(p, s);
#endif
#ifdef FC_SM90_VARIANTS_14
    case 35: return run_variant_v13_d256_bf16_16b(p, s);
    case 36: return run_variant_v13_lib_d256_bf16(p, s);
    case 37: return run_variant_v13_d64_fp16_16b(p, s);
#endif
  }
  return flashcore::Status::NotSupported("no such variant");
}
