// Parsing `flashcore fuzz ...`: every flag checked here, so a bad value is a usage error (exit 2).
#include "fuzz_options.h"

#include <limits>
#include <string_view>

#include "flag_values.h"

namespace flashcore::cli {
namespace {

bool parse_flag(std::string_view flag, std::string_view value, FuzzOptions* o, std::string* error) {
  if (flag == "--count") return parse_int<std::int64_t>(flag, value, 1, 100000000, &o->count, error);
  if (flag == "--seed") {
    return parse_int<std::uint64_t>(flag, value, 0, std::numeric_limits<std::uint64_t>::max(), &o->seed, error);
  }
  if (flag == "--max-seqlen") return parse_int<std::int64_t>(flag, value, 1, 1 << 20, &o->max_seqlen, error);
  if (flag == "--max-elements") {
    return parse_int<std::int64_t>(flag, value, 1, std::int64_t{1} << 40, &o->max_elements, error);
  }
  if (flag == "--threads") return parse_int(flag, value, 0, 4096, &o->threads, error);
  if (flag == "--jobs") return parse_int(flag, value, 0, 4096, &o->jobs, error);
  if (flag == "--problem") {
    o->problem = std::string(value);
    return true;
  }
  if (flag == "--device") return parse_device_choice(value, &o->device, error);
  if (flag == "--kernels") return parse_kernel_family(value, &o->kernels, error);
  *error = "unknown option '" + std::string(flag) + "'";
  return false;
}

bool takes_value(std::string_view flag) {
  for (const char* known : {"--count", "--seed", "--max-seqlen", "--max-elements", "--threads", "--jobs", "--problem",
                            "--device", "--kernels"}) {
    if (flag == known) return true;
  }
  return false;
}

}  // namespace

std::int64_t default_max_elements(bool on_cuda) { return on_cuda ? std::int64_t{1} << 22 : std::int64_t{1} << 18; }

bool parse_fuzz_options(int argc, const char* const* argv, FuzzOptions* o, bool* help, std::string* error) {
  *help = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      *help = true;
      return true;
    }
    if (flag == "--json") {
      o->json = true;
      continue;
    }
    if (flag == "--no-shrink") {
      o->shrink = false;
      continue;
    }
    if (flag == "--no-score-options") {
      o->score_options = false;
      continue;
    }
    if (flag == "--no-varlen") {
      o->varlen = false;
      continue;
    }
    std::string_view value;  // "--flag value" or "--flag=value"
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
  if (o->kernels != KernelFamily::kAuto && o->device == DeviceChoice::kCpu) {
    *error = "--kernels: picks a family of CUDA kernels; it does not apply to --device cpu";
    return false;
  }
  return true;
}

std::string fuzz_usage() {
  return "usage: flashcore fuzz [--device auto|cpu|cuda] [--kernels auto|sm80|sm90] [--count 200] [--seed 1]\n"
         "                      [--max-seqlen 4096] [--max-elements N] [--jobs N] [--threads N] [--json]\n"
         "                      [--no-shrink] [--no-score-options] [--no-varlen]\n"
         "       flashcore fuzz --problem SPEC [--device ...] [--kernels ...]\n"
         "  Draws --count random attention problems from --seed (batch, seqlen_q and seqlen_k in 1..--max-seqlen,\n"
         "  mostly small and ragged, MHA/GQA/MQA, head dims 1..256, fp16/bf16, causal or not, strided views,\n"
         "  forward or forward + backward, deterministic or not), runs flashcore on each and checks out, lse,\n"
         "  dq, dk, dv against the float64 reference under FlashAttention's rule: error <= 2x (gradients 3x)\n"
         "  that of a plain same-precision implementation + 2 ulp (dq and dk also get the error FlashAttention's\n"
         "  row sums D = rowsum(dO * O) add, flashcore/accuracy.h); outputs start as NaN, and NaN never passes;\n"
         "  a deterministic backward runs twice and must give the same bits.\n"
         "  A problem the device cannot serve (the library answers NotSupported, e.g. a --kernels family\n"
         "  the GPU lacks) is counted as skipped, not failed. Each failure is shrunk (sizes halved while it\n"
         "  still fails) and printed with its seed, a `flashcore fuzz --problem` line that reproduces it\n"
         "  exactly and a `flashcore run` line for the same shape. Exit 0 only when nothing failed.\n"
         "  --max-elements  cap on batch * heads * seqlen_q * seqlen_k per problem (default 2^18 on the CPU,\n"
         "                  2^22 on CUDA: the float64 reference on the host sets the pace)\n"
         "  --jobs          problems checked at once, one thread each (default: one per hardware thread);\n"
         "                  --jobs 1 gives each problem --threads threads instead. The report does not change.\n"
         "  --problem       run one problem, as a failure report prints it (batch=..,seqlen_q=..,...)\n"
         "  --no-shrink     report failures as drawn\n"
         "  --no-score-options  draw no window, softcap, ALiBi or dropout (a family that serves none of\n"
         "                  them would skip those problems); the other fields are drawn as with them\n"
         "  --no-varlen     draw no variable-length (cu_seqlens) batches; one problem in five is one otherwise\n"
         "  --json          one JSON object on stdout instead of the text report\n";
}

}  // namespace flashcore::cli
