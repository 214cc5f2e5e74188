// flashcore's attention entry points: forward() and backward().
//
// Layout (FlashAttention's):
//   q, out, dq, dout : (batch, seqlen_q, heads_q,  head_dim)
//   k, v, dk, dv     : (batch, seqlen_k, heads_kv, head_dim)
//   lse              : (batch, heads_q,  seqlen_q), float32, natural log
// Any strides are accepted as long as the last dimension (head_dim) is contiguous (stride 1).
//
// Semantics:
//   out = softmax(scale * q kᵀ + mask) v, computed exactly with an online softmax (never N×N).
//   lse[b, h, i] = log(sum_j exp(scale * q_i · k_j)) over the keys row i may see.
//   GQA/MQA: heads_q must be a multiple of heads_kv; query head h reads kv head
//            h / (heads_q / heads_kv), as in FlashAttention.
//   causal:  aligned to the bottom-right corner of the score matrix, as FlashAttention does
//            when seqlen_q != seqlen_k: query i may see key j iff j <= i + seqlen_k - seqlen_q.
//            A query row that sees no key at all (causal with seqlen_q > seqlen_k) gets an output
//            of 0 and an LSE of -inf; its gradients are 0.
//   window:  (window_left, window_right), -1 = unbounded on that side, FlashAttention 2.x's local
//            attention: query i sees key j iff j >= i + seqlen_k - seqlen_q - window_left (when
//            window_left >= 0) and j <= i + seqlen_k - seqlen_q + window_right (when
//            window_right >= 0). causal sets window_right to 0 whatever it was (as flash_attn
//            does), so causal with window_left = w sees the w + 1 keys up to its diagonal. Rows
//            that see no key: output 0, LSE -inf, as above. Tiles wholly outside the window are
//            skipped, so the cost follows the window, not seqlen_q x seqlen_k.
//   softcap: > 0 caps the scores: s = softcap * tanh(scale * q·k / softcap), then the softmax
//            (scale 1); the backward multiplies dS by 1 - tanh². 0 = off.
//   ALiBi:   alibi_slopes (float32, (heads_q,) or (batch, heads_q), on q's device) adds
//            -slope * |i + seqlen_k - seqlen_q - j| to the (scaled, capped) score of (i, j), as
//            flash_attn defines it. With causal flash_attn's kernel adds slope * j instead, which
//            differs by a per-row constant: the same output, an LSE shifted by that constant;
//            flashcore's LSE is the one of the formula above on every path.
//   The LSE is always log(sum_j exp(s_ij)) of the scores the softmax saw (capped, biased).
//   varlen:  variable-length batches (FlashAttention's varlen layout). With cu_seqlens_q present,
//            the sequences are packed along the first dimension:
//              q, out, dq, dout : (total_q, heads_q,  head_dim)
//              k, v, dk, dv     : (total_k, heads_kv, head_dim)
//              lse              : (heads_q, total_q), float32
//            cu_seqlens_q / cu_seqlens_k (int32, (batch + 1), on q's device) hold each sequence's
//            first row and, last, the total: sequence b is rows [cu_seqlens_q[b], cu_seqlens_q[b+1])
//            of q and [cu_seqlens_k[b], cu_seqlens_k[b+1]) of k and v; no pair crosses sequences,
//            and causal, the window and ALiBi are aligned per sequence (bottom-right of each one's
//            own score matrix). max_seqlen_q / max_seqlen_k (>= 1) bound every length. Offsets on
//            the host are checked (start at 0, never decrease, end at the total, lengths within the
//            max); offsets on a GPU are not read by the validation (that would synchronise), so
//            bad ones there give undefined results within the tensors' bounds. A sequence may be
//            empty; one with queries but no keys gives output 0 and LSE -inf.
//   paged:   (forward only, with varlen; flash_attn_varlen_func's block_table) k and v may instead be
//            pages of a KV cache, (num_pages, page_size, heads_kv, head_dim) each, with block_table
//            int32 (batch, max_pages) on q's device: key j of sequence b (j < its length from
//            cu_seqlens_k, whose offsets then only give lengths) is slot j % page_size of page
//            block_table[b, j / page_size]. max_seqlen_k must be at most max_pages * page_size. The
//            pages a sequence uses are checked to lie in [0, num_pages) on the host; on a GPU (like
//            the offsets there) they are not read by the validation, and an id outside that range
//            reads as zero keys. Every backend gathers the pages a call uses into packed
//            (total_k, heads_kv, head_dim) copies first, then runs the varlen forward on them
//            (docs/flash_attn_compat.md says why); backward() takes no pages.
//   dropout: dropout_p in [0, 1), 0 = off (training; flash_attn 2.x's semantics). After the softmax,
//            each probability P_ij is kept and scaled by 1 / (1 - dropout_p), or dropped to 0:
//              out_i = sum_j P_ij Z_ij v_j,   Z_ij = keep_ij / (1 - dropout_p)
//            The LSE stays the softmax's (before dropout). The backward must be given the forward's
//            dropout_p, seed and offset: it draws the same keep_ij again (nothing is stored) and
//            returns the gradients of that same function (dv_j = sum_i P_ij Z_ij dout_i, dP_ij =
//            Z_ij dout_i · v_j, dS_ij = P_ij (dP_ij - dout_i · out_i)).
//            keep_ij is decided by one random byte, as flash_attn 2.x does:
//              keep_ij  iff  byte(b, h, i, j) <= floor(255 * (1 - dropout_p))
//            so a probability is kept with (floor(255 (1 - p)) + 1) / 256 (0.8984 for p = 0.1) while
//            kept values are scaled by exactly 1 / (1 - p), as there. The byte of (batch b, query head
//            h, query row i, key column j) is drawn from Philox4x32-10 (src/common/philox.h) with
//              key      (low 32 bits of dropout_seed, high 32 bits of dropout_seed)
//              counter  x = (i / 16) * 8 + i % 8
//                       y = ((j / 64) * 4 + (j % 8) / 2) * 2 + (j / 8) % 2
//                       z = b * heads_q + h
//                       w = dropout_offset
//              byte     ((i % 16) / 8) * 2 + j % 2 (0 = least significant) of output word (j % 64) / 16
//            (one draw serves rows i and i + 8 of a 16-row group and 8 columns of a 64-column group,
//            exactly the entries one GPU thread holds of a tensor-core tile, so a kernel spends one
//            Philox call per 16 probabilities). i and j are row and column of the score matrix of
//            sequence b (varlen: within the sequence), whatever the layout. Every backend (float64
//            reference, CPU flash, CUDA kernels) draws this same mask, so results compare element
//            for element. batch * heads_q must be below 2^32.
//
// Non-finite inputs (NaN or ±inf in q, k or v) give what the plain formula
// softmax(s) = exp(s - max s) / sum exp(s - max s) computes over the keys a row sees; masked keys
// are never read. So for a query row:
//   - a NaN score, a +inf score (inf - inf), or every visible score -inf (0 / 0): the row's
//     output and LSE are NaN;
//   - a -inf score among finite ones: that key gets probability 0;
//   - ±inf or NaN in v_j: the rows that see key j get it in that column of their output
//     (±inf times a positive weight, NaN where infinities of both signs meet);
// and the gradients follow the same formula's backward (dq, dk, dv are NaN or infinite wherever it
// multiplies or adds those values; e.g. a NaN row of q makes dk and dv NaN for every key it sees).
// Rows that see no key keep output 0 and LSE -inf whatever their masked keys hold. Where a
// probability underflows to 0 in one precision but not another, 0 * inf may read NaN in one and
// inf in the other; the CPU backend is tested against the float64 reference on inputs where none
// does. The CUDA kernels follow the same rules with one exception: their tensor-core products
// multiply a masked probability (exactly 0) by what q, k and v hold, so a NaN or inf there also
// reaches rows or keys of the same tile that do not see it (e.g. causal rows before key j, within
// j's tile); it never reaches rows whose tiles skip its key.
//
// Every call returns a Status. A rejected call writes nothing; its message names the argument
// and what was expected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "flashcore/tensor.h"

namespace flashcore {

// Which implementation runs. kAuto follows the tensors' device: CPU tensors go to the tiled CPU
// flash backend, CUDA tensors to the best GPU kernel for the device's architecture.
enum class Backend : int {
  kAuto = 0,
  kCpu = 1,           // tiled, threaded CPU flash attention (fp32 accumulation)
  kCpuReference = 2,  // float64 reference that materialises the scores: the correctness oracle
  kCuda = 3,
};
const char* backend_name(Backend backend);

// Which family of GPU kernels runs CUDA tensors. kAuto takes the fastest one the device serves:
// sm90 (Hopper: TMA, wgmma) on compute capability 9.0 for the head dims it has, else sm80
// (Ampere-class mma.sync, compute capability 8.0 and newer). kSm80 / kSm90 force one, so a Hopper
// GPU can test and time both; a forced family that cannot serve the call fails with kNotSupported
// naming `kernels`. When this is kAuto, the environment variable FLASHCORE_KERNELS (auto, sm80 or
// sm90) forces a family instead, for tools that cannot set the field.
enum class KernelFamily : int {
  kAuto = 0,
  kSm80 = 1,
  kSm90 = 2,
};
const char* kernel_family_name(KernelFamily family);

inline constexpr int kMaxHeadDim = 256;

struct ForwardParams {
  TensorView q;
  TensorView k;
  TensorView v;
  TensorView out;  // same dtype as q
  TensorView lse;  // optional (data == nullptr: not written)
  std::optional<float> softmax_scale;  // default 1/sqrt(head_dim)
  bool causal = false;
  Backend backend = Backend::kAuto;
  KernelFamily kernels = KernelFamily::kAuto;  // CUDA backend only
  void* stream = nullptr;  // cudaStream_t for CUDA tensors; nullptr is the default stream
  int num_threads = 0;     // CPU backends: 0 uses every hardware thread
  // Score options (see "Semantics" above). The backward must be given the forward's.
  std::int64_t window_left = -1;   // -1: unbounded
  std::int64_t window_right = -1;  // -1: unbounded; causal implies 0
  float softcap = 0.0f;            // 0: off
  TensorView alibi_slopes;         // optional float32 (heads_q) or (batch, heads_q)
  // Variable-length batches (see "varlen" above); absent cu_seqlens_q: the dense layout.
  TensorView cu_seqlens_q;  // int32 (batch + 1)
  TensorView cu_seqlens_k;  // int32 (batch + 1)
  std::int64_t max_seqlen_q = 0;
  std::int64_t max_seqlen_k = 0;
  // Dropout (see "dropout" above): 0 = off. The backward must be given the forward's three values.
  float dropout_p = 0.0f;
  std::uint64_t dropout_seed = 0;
  std::uint32_t dropout_offset = 0;
  // Paged k and v (see "paged" above); absent: k and v hold the keys themselves.
  TensorView block_table;  // int32 (batch, max_pages), with cu_seqlens_q / cu_seqlens_k only
};

struct BackwardParams {
  TensorView q;
  TensorView k;
  TensorView v;
  TensorView out;   // the forward's output
  TensorView dout;  // gradient of the loss with respect to out
  TensorView lse;   // the forward's LSE (required)
  TensorView dq;    // outputs, same dtype and shapes as q, k, v
  TensorView dk;
  TensorView dv;
  std::optional<float> softmax_scale;
  bool causal = false;
  // Bit-identical gradients run after run (GPU: no floating-point atomics whose order varies).
  bool deterministic = false;
  Backend backend = Backend::kAuto;
  KernelFamily kernels = KernelFamily::kAuto;  // CUDA backend only
  void* stream = nullptr;
  int num_threads = 0;
  // Scratch memory on the tensors' device, at least backward_workspace_size() bytes. When null the
  // library allocates (and frees) it itself.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  // The forward's score options.
  std::int64_t window_left = -1;
  std::int64_t window_right = -1;
  float softcap = 0.0f;
  TensorView alibi_slopes;
  // The forward's variable-length layout.
  TensorView cu_seqlens_q;
  TensorView cu_seqlens_k;
  std::int64_t max_seqlen_q = 0;
  std::int64_t max_seqlen_k = 0;
  // The forward's dropout.
  float dropout_p = 0.0f;
  std::uint64_t dropout_seed = 0;
  std::uint32_t dropout_offset = 0;
};

Status forward(const ForwardParams& params);

// Bytes of scratch memory backward() needs for these params (0 for the CPU backends).
Status backward_workspace_size(const BackwardParams& params, std::size_t* bytes);
Status backward(const BackwardParams& params);

// Host memory the CPU flash backend allocates for these params beyond their tensors (per-thread
// tiles; never seqlen_q x seqlen_k); 0 for the other backends. For reports such as the CLI's.
Status host_scratch_bytes(const ForwardParams& params, std::size_t* bytes);
Status host_scratch_bytes(const BackwardParams& params, std::size_t* bytes);

// The GPU kernel family forward() / backward() would run for these params, kAuto resolved; nothing
// runs. Calls on a CPU backend report KernelFamily::kAuto. For reports that record which kernels ran.
Status selected_kernels(const ForwardParams& params, KernelFamily* family);
Status selected_kernels(const BackwardParams& params, KernelFamily* family);

}  // namespace flashcore
