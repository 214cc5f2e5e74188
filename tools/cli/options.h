// The command line of `flashcore run`: what to run, on which shape and device, and how to report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashcore/attention.h"
#include "flashcore/tensor.h"

namespace flashcore::cli {

enum class DeviceChoice { kAuto, kCpu, kCuda };

struct Options {
  std::int64_t batch = 2;
  std::int64_t seqlen_q = 1024;
  std::int64_t seqlen_k = 0;  // 0: same as seqlen_q
  std::int64_t heads_q = 12;
  std::int64_t heads_kv = 0;  // 0: same as heads_q
  std::int64_t head_dim = 64;
  DType dtype = DType::kFloat16;
  bool causal = false;
  std::int64_t window_left = -1;  // --window L,R (-1: unbounded)
  std::int64_t window_right = -1;
  double softcap = 0.0;  // --softcap X (0: off)
  bool alibi = false;    // --alibi: random slopes, as flash_attn's tests draw them
  double dropout_p = 0.0;  // --dropout P (0: off); the Philox seed is --seed, the offset 0
  bool backward = false;
  bool deterministic = false;  // backward: bit-identical gradients run after run
  DeviceChoice device = DeviceChoice::kAuto;
  KernelFamily kernels = KernelFamily::kAuto;  // CUDA: which GPU kernel family (--kernels)
  std::string impl = "flashcore";
  bool check = false;
  bool json = false;
  int repeats = -1;  // -1: the device's default (see default_repeats)
  int warmup = -1;
  std::uint64_t seed = 1234;
  int threads = 0;  // CPU: 0 uses every hardware thread
  // --kvcache: forward_kvcache (kvcache_run.h). seqlen_k is then the cache length per sequence
  // after the append (default 4096) and seqlen_q the new query tokens (default 1).
  bool kvcache = false;
  std::int64_t page_size = 0;  // --page-size N: a paged cache; 0: contiguous
  std::int64_t kv_new = 1;     // --new N: tokens appended per sequence
  int num_splits = 0;          // --splits N: split-KV count; 0: the heuristic
  bool seqlen_given = false;   // --seqlen was passed (the kvcache default differs)
  bool batch_given = false;    // --batch was passed (a --varlen list sets the batch itself)
  // --varlen: packed variable-length sequences (host_data.h's Shape). A list fixes the lengths (and
  // the batch); `random` draws --batch lengths in [1, --seqlen] and [1, --seqlen-k] from --seed.
  // After parsing, lengths_q / lengths_k hold the lengths either way (empty: dense).
  bool varlen_random = false;
  std::vector<std::int64_t> lengths_q;
  std::vector<std::int64_t> lengths_k;
};

// Timed runs by default: a few on the CPU (one default-shape pass takes a fraction of a second),
// many on the GPU (a pass takes well under a millisecond, so the median needs more samples).
int default_repeats(bool on_cuda);
int default_warmup(bool on_cuda);

// Parses argv (argv[0] is the program). An empty argument list, or just `run`, means the default
// shape. On failure returns false and sets *error to a one-line message; *help is set (and true
// returned) for -h/--help.
bool parse_options(int argc, const char* const* argv, Options* options, bool* help, std::string* error);

std::string usage();

}  // namespace flashcore::cli
