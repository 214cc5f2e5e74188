// Dev harness only: a C entry point over sm90::run_fwd for ctypes (check.py / bench.py).
#include <cstdint>
#include <cstring>

#include <cutlass/numeric_types.h>

#include "cuda/sm90/fwd_launch.h"

namespace fc = flashcore::cuda;

// FC_SM90_LIB_SUBSET (run_device.sh --lib): linked with a trimmed library, whose (dtype, head dim)
// kernels are named by FC_SM90_LIB_D<dim> and FC_SM90_LIB_<DTYPE>; otherwise with every sm90 TU.
#ifndef FC_SM90_LIB_SUBSET
#define FC_SM90_LIB_D64
#define FC_SM90_LIB_D96
#define FC_SM90_LIB_D128
#define FC_SM90_LIB_D192
#define FC_SM90_LIB_D256
#define FC_SM90_LIB_BF16
#define FC_SM90_LIB_FP16
#endif

template <typename Element>
static flashcore::Status dispatch_dim(int kernel_dim, const fc::FwdParams& p, cudaStream_t s) {
  switch (kernel_dim) {
#ifdef FC_SM90_LIB_D64
    case 64: return fc::sm90::run_fwd<Element, 64>(p, s);
#endif
#ifdef FC_SM90_LIB_D96
    case 96: return fc::sm90::run_fwd<Element, 96>(p, s);
#endif
#ifdef FC_SM90_LIB_D128
    case 128: return fc::sm90::run_fwd<Element, 128>(p, s);
#endif
#ifdef FC_SM90_LIB_D192
    case 192: return fc::sm90::run_fwd<Element, 192>(p, s);
#endif
#ifdef FC_SM90_LIB_D256
    case 256: return fc::sm90::run_fwd<Element, 256>(p, s);
#endif
  }
  return flashcore::Status::NotSupported("no sm90 kernel for this head dim in this harness");
}

#ifdef FC_SM90_VARIANTS
#include "variants/variants.h"
#endif

// strides: q, k, v, o as {batch, row, head} (12 values), then lse {batch, head}.
// kernel_dim >= 1000: a dev variant (variants/), numbered kernel_dim - 1000.
extern "C" int fc_sm90_fwd(int bf16, int kernel_dim, const void* q, const void* k, const void* v, void* out,
                           float* lse, const int64_t* strides, int batch, int heads_q, int heads_kv, int seqlen_q,
                           int seqlen_k, int head_dim, float softmax_scale, int causal, int sm_count, void* stream,
                           char* error, int error_len) {
  fc::FwdParams p;
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
  p.device.sm_count = sm_count;
  cudaGetDevice(&p.device.ordinal);
  p.q = q;
  p.k = k;
  p.v = v;
  p.out = out;
  p.lse = lse;
  fc::TensorStrides* ts[4] = {&p.q_strides, &p.k_strides, &p.v_strides, &p.o_strides};
  for (int i = 0; i < 4; ++i) *ts[i] = {strides[3 * i], strides[3 * i + 1], strides[3 * i + 2]};
  p.lse_strides = {strides[12], strides[13]};
  flashcore::Status st = flashcore::Status::Ok();
#ifdef FC_SM90_VARIANTS
  if (kernel_dim >= 1000) {
    st = run_variant(kernel_dim - 1000, p, static_cast<cudaStream_t>(stream));
  } else
#endif
#ifdef FC_SM90_VARIANTS_ONLY  // a harness of dev variants alone (no library objects linked)
  st = flashcore::Status::NotSupported("this harness holds dev variants only");
  (void)bf16;
#else
  if (bf16) {
#ifdef FC_SM90_LIB_BF16
    st = dispatch_dim<cutlass::bfloat16_t>(kernel_dim, p, static_cast<cudaStream_t>(stream));
#else
    st = flashcore::Status::NotSupported("no bf16 kernels in this harness");
#endif
  } else {
#ifdef FC_SM90_LIB_FP16
    st = dispatch_dim<cutlass::half_t>(kernel_dim, p, static_cast<cudaStream_t>(stream));
#else
    st = flashcore::Status::NotSupported("no fp16 kernels in this harness");
#endif
  }
#endif
  if (st.ok()) return 0;
  std::strncpy(error, st.message().c_str(), error_len - 1);
  error[error_len - 1] = 0;
  return 1;
}
