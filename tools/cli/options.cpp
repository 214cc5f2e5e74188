// Parsing `flashcore run ...`: every flag checked here so a bad value is a usage error (exit 2)
// rather than a library error later.
#include "options.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "flag_values.h"

#include "flashcore/attention.h"
#include "runner.h"
#include "varlen.h"

namespace flashcore::cli {
namespace {

// Per-dimension limits, and a limit on a tensor's elements that keeps every size product the
// CLI forms (elements, bytes) inside int64. Real runs are far below both.
constexpr std::int64_t kMaxExtent = std::int64_t{1} << 24;
constexpr double kMaxTensorElements = 68719476736.0;  // 2^36

// --window L,R: two integers, each -1 (unbounded) or at least 0.
bool parse_window(std::string_view value, Options* o, std::string* error) {
  const std::size_t comma = value.find(',');
  if (comma == std::string_view::npos) {
    *error = "--window: expected L,R (e.g. 256,0; -1 = unbounded), got '" + std::string(value) + "'";
    return false;
  }
  return parse_int<std::int64_t>("--window (left)", value.substr(0, comma), -1, kMaxExtent, &o->window_left, error) &&
         parse_int<std::int64_t>("--window (right)", value.substr(comma + 1), -1, kMaxExtent, &o->window_right,
                                 error);
}

bool parse_softcap(std::string_view value, Options* o, std::string* error) {
  const std::string text(value);
  char* end = nullptr;
  const double parsed = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(parsed) || parsed < 0.0) {
    *error = "--softcap: expected a finite number >= 0 (0 = off), got '" + text + "'";
    return false;
  }
  o->softcap = parsed;
  return true;
}

bool parse_dropout(std::string_view value, Options* o, std::string* error) {
  const std::string text(value);
  char* end = nullptr;
  const double parsed = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(parsed) || parsed < 0.0 || parsed >= 1.0) {
    *error = "--dropout: expected a probability in [0, 1) (0 = off), got '" + text + "'";
    return false;
  }
  o->dropout_p = parsed;
  return true;
}

bool parse_flag(std::string_view flag, std::string_view value, Options* o, std::string* error) {
  if (flag == "--window") return parse_window(value, o, error);
  if (flag == "--dropout") return parse_dropout(value, o, error);
  if (flag == "--softcap") return parse_softcap(value, o, error);
  if (flag == "--batch") {
    o->batch_given = true;
    return parse_int<std::int64_t>(flag, value, 1, kMaxExtent, &o->batch, error);
  }
  if (flag == "--varlen") {
    o->varlen_random = value == "random";
    if (o->varlen_random) return true;
    *error = parse_varlen_list(value, &o->lengths_q, &o->lengths_k);
    return error->empty();
  }
  if (flag == "--seqlen") {
    o->seqlen_given = true;
    return parse_int<std::int64_t>(flag, value, 1, kMaxExtent, &o->seqlen_q, error);
  }
  if (flag == "--page-size") return parse_int<std::int64_t>(flag, value, 0, kMaxExtent, &o->page_size, error);
  if (flag == "--new") return parse_int<std::int64_t>(flag, value, 0, kMaxExtent, &o->kv_new, error);
  if (flag == "--splits") return parse_int(flag, value, 0, 128, &o->num_splits, error);
  if (flag == "--seqlen-k") return parse_int<std::int64_t>(flag, value, 1, kMaxExtent, &o->seqlen_k, error);
  if (flag == "--heads") return parse_int<std::int64_t>(flag, value, 1, 4096, &o->heads_q, error);
  if (flag == "--heads-kv") return parse_int<std::int64_t>(flag, value, 1, 4096, &o->heads_kv, error);
  if (flag == "--head-dim") return parse_int<std::int64_t>(flag, value, 1, kMaxHeadDim, &o->head_dim, error);
  if (flag == "--repeats") return parse_int(flag, value, 0, 1000000, &o->repeats, error);
  if (flag == "--warmup") return parse_int(flag, value, 0, 1000000, &o->warmup, error);
  if (flag == "--threads") return parse_int(flag, value, 0, 4096, &o->threads, error);
  if (flag == "--seed") {
    return parse_int<std::uint64_t>(flag, value, 0, std::numeric_limits<std::uint64_t>::max(), &o->seed, error);
  }
  if (flag == "--impl") {
    o->impl = std::string(value);
    return true;
  }
  if (flag == "--dtype") {
    if (value == "fp16" || value == "float16") {
      o->dtype = DType::kFloat16;
    } else if (value == "bf16" || value == "bfloat16") {
      o->dtype = DType::kBFloat16;
    } else {
      *error = "--dtype: expected fp16 or bf16, got '" + std::string(value) + "'";
      return false;
    }
    return true;
  }
  if (flag == "--device") return parse_device_choice(value, &o->device, error);
  if (flag == "--kernels") return parse_kernel_family(value, &o->kernels, error);
  *error = "unknown option '" + std::string(flag) + "'";
  return false;
}

bool takes_value(std::string_view flag) {
  for (const char* known : {"--batch", "--seqlen", "--seqlen-k", "--heads", "--heads-kv", "--head-dim", "--dtype",
                            "--device", "--kernels", "--impl", "--repeats", "--warmup", "--seed", "--threads",
                            "--window", "--softcap", "--dropout", "--page-size", "--new", "--splits", "--varlen"}) {
    if (flag == known) return true;
  }
  return false;
}

// Flags without a value; false when `flag` is not one of them.
bool parse_switch(std::string_view flag, Options* o) {
  bool* target = nullptr;
  if (flag == "--causal") target = &o->causal;
  if (flag == "--alibi") target = &o->alibi;
  if (flag == "--backward") target = &o->backward;
  if (flag == "--deterministic") target = &o->deterministic;
  if (flag == "--check") target = &o->check;
  if (flag == "--json") target = &o->json;
  if (flag == "--kvcache") target = &o->kvcache;
  if (target != nullptr) *target = true;
  return target != nullptr;
}

// --varlen after every flag is read: random lengths drawn, or a list's batch and max_seqlen set
// (--seqlen / --seqlen-k, when given with a list, are the max_seqlen bounds and must hold).
bool finish_varlen(Options* o, bool seqlen_k_given, std::string* error) {
  if (o->kvcache) {
    *error = "--varlen: forward_kvcache takes per-sequence cache lengths, not --varlen";
    return false;
  }
  if (o->varlen_random) {
    draw_random_lengths(o->batch, o->seqlen_q, o->seqlen_k, o->seed, &o->lengths_q, &o->lengths_k);
    return true;
  }
  const std::int64_t count = static_cast<std::int64_t>(o->lengths_q.size());
  if (o->batch_given && o->batch != count) {
    *error = "--batch (" + std::to_string(o->batch) + ") differs from the " + std::to_string(count) +
             " sequences --varlen lists; drop --batch";
    return false;
  }
  o->batch = count;
  const std::int64_t longest_q = *std::max_element(o->lengths_q.begin(), o->lengths_q.end());
  const std::int64_t longest_k = *std::max_element(o->lengths_k.begin(), o->lengths_k.end());
  if (o->seqlen_given && o->seqlen_q < longest_q) {
    *error = "--seqlen (" + std::to_string(o->seqlen_q) + ", max_seqlen_q with --varlen) is below the longest "
             "query length listed (" + std::to_string(longest_q) + ")";
    return false;
  }
  if (seqlen_k_given && o->seqlen_k < longest_k) {
    *error = "--seqlen-k (" + std::to_string(o->seqlen_k) + ", max_seqlen_k with --varlen) is below the longest "
             "key length listed (" + std::to_string(longest_k) + ")";
    return false;
  }
  // Without them the bounds are the longest lengths (at least 1, as max_seqlen must be).
  if (!o->seqlen_given) o->seqlen_q = std::max<std::int64_t>(1, longest_q);
  if (!seqlen_k_given) o->seqlen_k = std::max<std::int64_t>(1, longest_k);
  return true;
}

}  // namespace

int default_repeats(bool on_cuda) { return on_cuda ? 50 : 3; }
int default_warmup(bool on_cuda) { return on_cuda ? 10 : 1; }

bool parse_options(int argc, const char* const* argv, Options* o, bool* help, std::string* error) {
  *help = false;
  int i = 1;
  if (i < argc) {
    const std::string_view command = argv[i];
    if (command == "-h" || command == "--help" || command == "help") {
      *help = true;
      return true;
    }
    if (command != "run") {
      *error = "unknown command '" + std::string(command) + "' (expected 'run')";
      return false;
    }
    ++i;
  }
  for (; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      *help = true;
      return true;
    }
    if (parse_switch(flag, o)) continue;
    // Both "--flag value" and "--flag=value".
    std::string_view value;
    const std::size_t equals = flag.find('=');
    if (equals != std::string_view::npos && flag.substr(0, 2) == "--") {
      value = flag.substr(equals + 1);
      flag = flag.substr(0, equals);
    } else if (flag.substr(0, 2) != "--") {
      *error = "unexpected argument '" + std::string(flag) + "'";
      return false;
    } else if (!takes_value(flag)) {
      *error = "unknown option '" + std::string(flag) + "'";
      return false;
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      *error = std::string(flag) + ": missing value";
      return false;
    }
    if (!parse_flag(flag, value, o, error)) return false;
  }
  if (o->kvcache) {
    if (!o->seqlen_given) o->seqlen_q = 1;
    if (o->seqlen_k == 0) o->seqlen_k = 4096;
    if (o->backward) {
      *error = "--kvcache: forward_kvcache has no backward; drop --backward";
      return false;
    }
    if (o->kv_new > o->seqlen_k) {
      *error = "--new (" + std::to_string(o->kv_new) + ") must be at most --seqlen-k (the cache length)";
      return false;
    }
  } else if (o->page_size != 0 || o->kv_new != 1 || o->num_splits != 0) {
    *error = "--page-size, --new, --splits: apply to --kvcache runs";
    return false;
  }
  const bool seqlen_k_given = o->seqlen_k != 0;
  if (o->seqlen_k == 0) o->seqlen_k = o->seqlen_q;
  if (o->heads_kv == 0) o->heads_kv = o->heads_q;
  if ((o->varlen_random || !o->lengths_q.empty()) && !finish_varlen(o, seqlen_k_given, error)) return false;
  const double q_elements = static_cast<double>(o->batch) * static_cast<double>(o->seqlen_q) *
                            static_cast<double>(o->heads_q) * static_cast<double>(o->head_dim);
  const double kv_elements = static_cast<double>(o->batch) * static_cast<double>(o->seqlen_k) *
                             static_cast<double>(o->heads_kv) * static_cast<double>(o->head_dim);
  if (q_elements > kMaxTensorElements || kv_elements > kMaxTensorElements) {
    *error = "the shape is too large: a tensor of more than 2^36 elements";
    return false;
  }
  if (o->deterministic && !o->backward) {
    *error = "--deterministic: applies to the backward pass; add --backward";
    return false;
  }
  if (o->heads_q % o->heads_kv != 0) {
    *error = "--heads (" + std::to_string(o->heads_q) + ") must be a multiple of --heads-kv (" +
             std::to_string(o->heads_kv) + ")";
    return false;
  }
  return true;
}

std::string usage() {
  std::string impls;
  for (const std::string& name : impl_names()) impls += (impls.empty() ? "" : "|") + name;
  const std::string rungs = ladder_rung_help();
  std::string text =
      "usage: flashcore run [--batch 2] [--seqlen 1024] [--heads 12] [--head-dim 64] [--dtype fp16|bf16]\n"
      "                     [--seqlen-k N] [--heads-kv N] [--causal] [--backward] [--device auto|cpu|cuda]\n"
      "                     [--deterministic] [--kernels auto|sm80|sm90] [--impl " + impls + "]\n"
      "                     [--window L,R] [--softcap X] [--alibi] [--dropout P] [--varlen LIST|random]\n"
      "                     [--kvcache [--page-size N] [--new N] [--splits N]]\n"
      "                     [--check] [--json]\n"
      "                     [--repeats N] [--warmup N] [--seed N] [--threads N]\n"
      "  Runs attention on seeded random Q, K, V (B, S, H, D layout) and prints the median and p90 time\n"
      "  over --repeats runs after --warmup runs (CPU default 3 after 1, CUDA 50 after 10; --repeats 0\n"
      "  runs once untimed), TFLOP/s, and the extra memory next to standard attention's N x N matrices.\n"
      "  --check     compares out, lse (and dq, dk, dv with --backward) with a float64 reference;\n"
      "              exit 1 when an error is above its bound\n"
      "  --json      one JSON object on stdout instead of the text report\n"
      "  --deterministic  with --backward: bit-identical gradients run after run (CUDA: one dQ\n"
      "              accumulator slice per key-block column, summed in a fixed order; the CPU\n"
      "              backend always is)\n"
      "  --window    sliding window (left, right), -1 = unbounded: query i sees keys j with\n"
      "              i + Sk - Sq - L <= j <= i + Sk - Sq + R (--causal sets R to 0); TFLOP/s then\n"
      "              count the visible scores only\n"
      "  --softcap   scores become X * tanh(score / X) (Gemma 2's logit softcap)\n"
      "  --alibi     ALiBi with random (batch, heads) slopes in [0, 0.3), as flash_attn's tests\n"
      "  --dropout   dropout with probability P on the attention probabilities (training), the\n"
      "              Philox stream keyed by --seed, offset 0 (flashcore/attention.h, \"dropout\")\n"
      "  --varlen    variable-length sequences packed as flash_attn_varlen_func's (total, heads, dim):\n"
      "              a list of per-sequence lengths, N (queries = keys) or Q:K, e.g. 100,37:60,0 (the\n"
      "              batch is their count; --seqlen / --seqlen-k, if given, are max_seqlen_q / _k), or\n"
      "              random: --batch lengths in [1, --seqlen] and [1, --seqlen-k], drawn from --seed;\n"
      "              --check compares each sequence with the reference run on it alone\n"
      "  --device    auto: CUDA when this build has it and a GPU is present, else the CPU\n"
      "  --kernels   CUDA: the GPU kernel family; auto (default) takes sm90 on an H100/H200 where it\n"
      "              serves the head dim, else sm80; sm80 or sm90 forces one (FLASHCORE_KERNELS too)\n"
      "  --impl      flashcore (default) | reference (the float64 CPU oracle, rounded to --dtype)\n";
  if (!rungs.empty()) text += "              | a teaching-ladder rung, on CUDA:\n" + rungs;
  text +=
      "  --threads   CPU worker threads (0: all)\n"
      "  --kvcache   forward_kvcache (flash_attn_with_kvcache): --new N tokens (default 1) appended to\n"
      "              each sequence's cache, then --seqlen query rows (default 1) attend to the cache\n"
      "              of --seqlen-k positions (default 4096); --page-size N pages it (any N >= 1);\n"
      "              --splits N forces the split-KV count (0: heuristic); prints KV GB/s\n"
      "  With no arguments: flashcore run (B=2, S=1024, H=12, D=64, fp16 on the best device present).\n";
  return text;
}

}  // namespace flashcore::cli
