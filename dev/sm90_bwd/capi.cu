// Dev harness only: a C entry point over sm90::run_bwd for ctypes (check.py).
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <cutlass/numeric_types.h>

#include "cuda/sm90/bwd_launch.h"

namespace fc = flashcore::cuda;

#ifdef FC_BWD_VARIANTS
namespace flashcore::cuda::sm90 {
Status run_bwd_variant(int variant, const BwdParams& p, cudaStream_t s);  // variants.cu
}
#endif

// The library defines this in backward.cu; the harness links without it, so it carries the same
// plan (main's src/cuda/backward.cu, BwdWorkspace::plan and carve).
namespace flashcore::cuda {
BwdWorkspace BwdWorkspace::plan(const ProblemParams& p, int seqlen_q_rounding, int head_dim_rounded, int num_splits) {
  const auto align = [](std::size_t bytes) { return (bytes + 255) / 256 * 256; };
  BwdWorkspace w;
  w.seqlen_q_rounded = (p.seqlen_q + seqlen_q_rounding - 1) / seqlen_q_rounding * seqlen_q_rounding;
  w.num_splits = num_splits;
  const std::int64_t rows = static_cast<std::int64_t>(p.batch) * p.heads_q * w.seqlen_q_rounded;
  w.dq_accum_split_elems = rows * head_dim_rounded;
  w.lse_log2_offset = 0;
  w.dsum_offset = align(static_cast<std::size_t>(rows) * sizeof(float));
  w.dq_accum_offset = w.dsum_offset + align(static_cast<std::size_t>(rows) * sizeof(float));
  w.total_bytes = w.dq_accum_offset + static_cast<std::size_t>(num_splits) *
                                          static_cast<std::size_t>(w.dq_accum_split_elems) * sizeof(float);
  return w;
}
void BwdWorkspace::carve(void* base, BwdParams* params) const {
  char* bytes = static_cast<char*>(base);
  params->lse_log2 = reinterpret_cast<float*>(bytes + lse_log2_offset);
  params->dsum = reinterpret_cast<float*>(bytes + dsum_offset);
  params->dq_accum = reinterpret_cast<float*>(bytes + dq_accum_offset);
  params->dq_accum_split_stride = dq_accum_split_elems;
  params->seqlen_q_rounded = seqlen_q_rounded;
  params->num_splits = num_splits;
}
}  // namespace flashcore::cuda

// Score options for the calls that follow (fc_sm90_bwd_set_options): a call with any runs the
// score-option kernels (run_bwd_options; build.sh's TU bwd_sm90_<dtype>_hdim128_options).
struct ScoreOptionsArgs {
  int window_left = -1, window_right = -1;
  float softcap = 0.0f;
  const float* alibi_slopes = nullptr;
  int64_t alibi_batch_stride = 0;
  bool any() const { return window_left >= 0 || window_right >= 0 || softcap > 0.0f || alibi_slopes != nullptr; }
};
static ScoreOptionsArgs g_options;
extern "C" void fc_sm90_bwd_set_options(int window_left, int window_right, float softcap, const float* alibi_slopes,
                                        int64_t alibi_batch_stride) {
  g_options = {window_left, window_right, softcap, alibi_slopes, alibi_batch_stride};
}

// Only the instantiations build.sh compiled are linked: FC_BWD_<dtype>_D<dim> names them.
static flashcore::Status dispatch(int bf16, int kernel_dim, const fc::BwdParams& p, cudaStream_t s) {
  using bf16_t = cutlass::bfloat16_t;
  using fp16_t = cutlass::half_t;
  if (g_options.any()) {
#ifdef FC_BWD_BF16_D128_options
    if (kernel_dim <= 128 && bf16) return fc::sm90::run_bwd_options<bf16_t, 128>(p, s);
#endif
#ifdef FC_BWD_FP16_D128_options
    if (kernel_dim <= 128 && !bf16) return fc::sm90::run_bwd_options<fp16_t, 128>(p, s);
#endif
    return flashcore::Status::NotSupported("no sm90 score-option backward kernel built for this dtype");
  }
#define FC_CASE(macro, elem, dim) \
  if (kernel_dim == dim && bf16 == std::is_same_v<elem, bf16_t>) return fc::sm90::run_bwd<elem, dim>(p, s);
#ifdef FC_BWD_BF16_D64
  FC_CASE(x, bf16_t, 64)
#endif
#ifdef FC_BWD_BF16_D96
  FC_CASE(x, bf16_t, 96)
#endif
#ifdef FC_BWD_BF16_D128
  FC_CASE(x, bf16_t, 128)
#endif
#ifdef FC_BWD_BF16_D256
  FC_CASE(x, bf16_t, 256)
#endif
#ifdef FC_BWD_FP16_D256
  FC_CASE(x, fp16_t, 256)
#endif
#ifdef FC_BWD_FP16_D64
  FC_CASE(x, fp16_t, 64)
#endif
#ifdef FC_BWD_FP16_D96
  FC_CASE(x, fp16_t, 96)
#endif
#ifdef FC_BWD_FP16_D128
  FC_CASE(x, fp16_t, 128)
#endif
#undef FC_CASE
  return flashcore::Status::NotSupported("no sm90 backward kernel built for this dtype and head dim");
}

static fc::BwdParams make_params(int batch, int heads_q, int heads_kv, int seqlen_q, int seqlen_k, int head_dim,
                                 float softmax_scale, int causal, int deterministic, int sm_count) {
  fc::BwdParams p;
  p.deterministic = deterministic != 0;
  p.device.sm_count = sm_count;
  p.device.compute_capability = 90;
  p.batch = batch;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.head_dim = head_dim;
  p.group_size = heads_q / heads_kv;
  p.softmax_scale = softmax_scale;
  p.scale_log2 = softmax_scale * 1.4426950408889634f;
  p.causal = causal != 0;
  // The options as the library's validation sets them (params.h; api): window_right 0 when causal.
  p.window_left = g_options.window_left;
  p.window_right = p.causal ? 0 : g_options.window_right;
  p.softcap = g_options.softcap;
  p.softcap_scale = p.softcap > 0.0f ? softmax_scale / p.softcap : 0.0f;
  p.score_unit = p.softcap > 0.0f ? p.softcap : softmax_scale;
  p.score_unit_log2 = p.score_unit * 1.4426950408889634f;
  p.alibi_unit_scale = 1.0f / p.score_unit;
  p.alibi_slopes = g_options.alibi_slopes;
  p.alibi_batch_stride = g_options.alibi_batch_stride;
  p.has_score_mod = p.softcap > 0.0f || p.alibi_slopes != nullptr;
  p.has_options = g_options.any();
  return p;
}

// A dev variant's kernel head dim (variants.cu), which its workspace plan takes and the harness
// scripts pair with the problem's: 16 d64, 17 d96, the rest d128.
extern "C" int fc_sm90_bwd_variant_dim(int variant) {
  if (variant == 16) return 64;
  if (variant == 17) return 96;
  return 128;
}

extern "C" int64_t fc_sm90_bwd_workspace_size(int batch, int heads_q, int heads_kv, int seqlen_q, int seqlen_k,
                                              int head_dim, int kernel_dim, int deterministic, int sm_count) {
  fc::BwdParams p = make_params(batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, 1.0f, 0, deterministic, sm_count);
  return static_cast<int64_t>(fc::sm90::plan_bwd_workspace(p, kernel_dim).total_bytes);
}

// CTAs per kv head's query-head group for the calls that follow (BwdParams::forced_kv_splits):
// 0 lets the launcher choose; 1, 2, 4 force it (the split rule's A/B).
static int g_forced_kv_splits = 0;
extern "C" void fc_sm90_bwd_force_kv_splits(int splits) { g_forced_kv_splits = splits; }
// (batch, kv head) units per L2 section of the d256 causal order (BwdParams::forced_l2_section); 0: the rule.
static int g_forced_l2_section = 0;
extern "C" void fc_sm90_bwd_force_l2_section(int section) { g_forced_l2_section = section; }

// strides: q, k, v, o, do, dq, dk, dv as {batch, row, head} (24 values), then lse {batch, head}.
extern "C" int fc_sm90_bwd(int bf16, int kernel_dim, const void* q, const void* k, const void* v, const void* out,
                           const void* dout, const float* lse, void* dq, void* dk, void* dv, const int64_t* strides,
                           int batch, int heads_q, int heads_kv, int seqlen_q, int seqlen_k, int head_dim,
                           float softmax_scale, int causal, int deterministic, int sm_count, void* workspace,
                           void* stream, char* error, int error_len) {
  fc::BwdParams p = make_params(batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, softmax_scale, causal,
                                deterministic, sm_count);
  p.forced_kv_splits = g_forced_kv_splits;
  p.forced_l2_section = g_forced_l2_section;
  p.q = q;
  p.k = k;
  p.v = v;
  p.out = out;
  p.dout = dout;
  p.lse = lse;
  p.dq = dq;
  p.dk = dk;
  p.dv = dv;
  fc::TensorStrides* ts[8] = {&p.q_strides, &p.k_strides, &p.v_strides, &p.o_strides,
                              &p.do_strides, &p.dq_strides, &p.dk_strides, &p.dv_strides};
  for (int i = 0; i < 8; ++i) *ts[i] = {strides[3 * i], strides[3 * i + 1], strides[3 * i + 2]};
  p.lse_strides = {strides[24], strides[25]};
  fc::sm90::plan_bwd_workspace(p, kernel_dim >= 1000 ? fc_sm90_bwd_variant_dim(kernel_dim - 1000) : kernel_dim)
      .carve(workspace, &p);
  flashcore::Status st = flashcore::Status::Ok();
#ifdef FC_BWD_VARIANTS
  if (kernel_dim >= 1000) {
    st = fc::sm90::run_bwd_variant(kernel_dim - 1000, p, static_cast<cudaStream_t>(stream));
  } else
#endif
    st = dispatch(bf16, kernel_dim, p, static_cast<cudaStream_t>(stream));
  if (st.ok()) return 0;
  std::strncpy(error, st.message().c_str(), error_len - 1);
  error[error_len - 1] = 0;
  return 1;
}
