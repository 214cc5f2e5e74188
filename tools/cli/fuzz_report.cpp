// The text and JSON reports of `flashcore fuzz` (fuzz_report.h).
#include "fuzz_report.h"

#include <cctype>
#include <cstdio>
#include <sstream>

namespace flashcore::cli {
namespace {

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string device_flags(const FuzzSummary& s) {
  std::string flags = "--device " + s.device;
  if (s.device == "cuda" && s.kernels != "auto") flags += " --kernels " + s.kernels;
  return flags;
}

bool strided(const FuzzProblem& p) {
  return p.inputs.kind != LayoutKind::kContiguous || p.outputs.kind != LayoutKind::kContiguous;
}

}  // namespace

void FuzzCoverage::add(const FuzzProblem& p) {
  const Shape& s = p.shape;
  const auto count = [&](const char* name, bool yes) {
    if (yes) ++counts[name];
  };
  count("backward", p.backward);
  count("deterministic", p.deterministic);
  count("causal", s.causal);
  count("bf16", p.dtype == DType::kBFloat16);
  count("gqa", s.heads_kv > 1 && s.heads_q > s.heads_kv);
  count("mqa", s.heads_kv == 1 && s.heads_q > 1);
  count("strided_views", strided(p));
  count("seqlen_q_below_seqlen_k", s.seqlen_q < s.seqlen_k);
  count("seqlen_q_above_seqlen_k", s.seqlen_q > s.seqlen_k);
  count("seqlen_1", s.seqlen_q == 1 || s.seqlen_k == 1);
  count("seqlen_above_1024", s.seqlen_q > 1024 || s.seqlen_k > 1024);
  count("head_dim_not_multiple_of_8", s.head_dim % 8 != 0);
  count("causal_rows_without_keys", s.causal && s.seqlen_q > s.seqlen_k);
  count("window", s.has_window());
  count("softcap", s.softcap > 0.0);
  count("alibi", s.alibi);
  count("dropout", s.dropout_p > 0.0);
  count("varlen", s.varlen());
  bool empty_sequence = false;
  for (std::int64_t b = 0; s.varlen() && b < s.batch; ++b) empty_sequence |= s.length_q(b) == 0 || s.length_k(b) == 0;
  count("varlen_empty_sequence", empty_sequence);
}

std::string fuzz_reproduce_line(const FuzzSummary& summary, const FuzzProblem& problem) {
  return "flashcore fuzz " + device_flags(summary) + " --problem '" + problem_spec(problem) + "'";
}

std::string run_reproduce_line(const FuzzSummary& summary, const FuzzProblem& problem) {
  return "flashcore run " + device_flags(summary) + " " + run_flags(problem);
}

std::string skip_reason_key(const std::string& message) {
  std::string key;
  for (std::size_t i = 0; i < message.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(message[i]))) {
      if (key.empty() || key.back() != 'N') key += 'N';
      while (i + 1 < message.size() && std::isdigit(static_cast<unsigned char>(message[i + 1]))) ++i;
    } else {
      key += message[i];
    }
  }
  return key;
}

void print_failure_text(const FuzzSummary& summary, const FuzzFailure& f) {
  std::ostringstream out;
  out << "FAIL";
  if (f.index >= 0) {
    out << " problem " << f.index << " (seed " << summary.seed << ", problem seed " << f.problem_seed << ")";
  }
  out << ": " << describe(f.drawn) << "\n";
  if (problem_spec(f.shrunk) != problem_spec(f.drawn)) out << "  shrunk to  " << describe(f.shrunk) << "\n";
  out << "  why        " << f.message << "\n";
  out << "  reproduce  " << fuzz_reproduce_line(summary, f.shrunk) << "\n";
  out << "  same shape " << run_reproduce_line(summary, f.shrunk) << "\n";
  if (strided(f.shrunk)) {
    out << "             (run uses contiguous tensors and its own fixed bound: the fuzz line above is the exact one)\n";
  }
  std::fputs(out.str().c_str(), stdout);
  std::fflush(stdout);
}

void print_summary_text(const FuzzSummary& s) {
  std::ostringstream out;
  out << "flashcore fuzz: " << s.count << " problems from seed " << s.seed << " on " << s.device << " ("
      << s.hardware << (s.device == "cuda" ? ", kernels " + s.kernels : "") << ")\n";
  out << "  limits     seqlen <= " << s.max_seqlen << ", batch*heads*seqlen_q*seqlen_k <= " << s.max_elements << "\n";
  out << "  result     " << s.passed << " passed, " << s.failed << " failed, " << s.skipped
      << " skipped (unsupported)\n";
  for (const auto& [reason, n] : s.skip_reasons) out << "  skipped    " << n << " x " << reason << "\n";
  out << "  covered   ";
  for (const auto& [name, n] : s.coverage.counts) out << " " << name << " " << n;
  out << "\n  rule       error <= 2x (gradients 3x) a plain same-precision implementation's + 2 ulp"
         " (dq, dk: + the row-sum allowance of flashcore/accuracy.h); NaN never passes\n";
  out << "  time       " << s.seconds << " s\n";
  out << (s.failed == 0 ? "PASS" : "FAIL") << "\n";
  std::fputs(out.str().c_str(), stdout);
}

void print_summary_json(const FuzzSummary& s) {
  std::ostringstream out;
  out << "{\"command\": \"fuzz\", \"device\": " << json_string(s.device) << ", \"hardware\": "
      << json_string(s.hardware) << ", \"kernels\": " << json_string(s.kernels) << ", \"seed\": " << s.seed
      << ", \"count\": " << s.count << ", \"max_seqlen\": " << s.max_seqlen << ", \"max_elements\": "
      << s.max_elements << ", \"passed\": " << s.passed << ", \"failed\": " << s.failed << ", \"skipped\": "
      << s.skipped << ", \"seconds\": " << s.seconds << ", \"skip_reasons\": {";
  const char* sep = "";
  for (const auto& [reason, n] : s.skip_reasons) {
    out << sep << json_string(reason) << ": " << n;
    sep = ", ";
  }
  out << "}, \"coverage\": {";
  sep = "";
  for (const auto& [name, n] : s.coverage.counts) {
    out << sep << json_string(name) << ": " << n;
    sep = ", ";
  }
  out << "}, \"failures\": [";
  sep = "";
  for (const FuzzFailure& f : s.failures) {
    out << sep << "{\"index\": " << f.index << ", \"problem_seed\": " << f.problem_seed
        << ", \"problem\": " << json_string(problem_spec(f.drawn)) << ", \"shrunk\": "
        << json_string(problem_spec(f.shrunk)) << ", \"message\": " << json_string(f.message)
        << ", \"reproduce\": " << json_string(fuzz_reproduce_line(s, f.shrunk))
        << ", \"run\": " << json_string(run_reproduce_line(s, f.shrunk)) << "}";
    sep = ", ";
  }
  out << "]}\n";
  std::fputs(out.str().c_str(), stdout);
}

}  // namespace flashcore::cli
