// The text report and the --json object.
#include "report.h"
#include "varlen.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "flops.h"

namespace flashcore::cli {
namespace {

std::string format(const char* spec, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), spec, value);
  return buffer;
}

std::string bytes_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  return format(unit == 0 ? "%.0f" : "%.1f", bytes) + " " + units[unit];
}

double tflops(const Shape& s, Pass pass, double ms) { return flops(s, pass) / (ms * 1e-3) / 1e12; }

// JSON numbers: non-finite values (an error that is NaN or infinite) become null.
// Whole numbers (byte and FLOP counts) print in full.
std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  if (value == std::floor(value) && std::fabs(value) < 1e15) return format("%.0f", value);
  return format("%.6g", value);
}
template <typename T>
std::string json_optional(const std::optional<T>& value) {
  return value ? json_number(static_cast<double>(*value)) : "null";
}
std::string json_bool(bool value) { return value ? "true" : "false"; }
// Our strings are names and fixed phrases; escaping quotes and backslashes is all they can need.
std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string json_check(const CheckResult& check) {
  const TensorCheck& out = check.tensors.front();
  std::string json = "{\"passed\": " + json_bool(check.passed) + ", \"max_abs_error\": " +
                     json_number(out.max_abs_error) + ", \"rel_error\": " + json_number(out.rel_error) +
                     ", \"rule\": " + json_string(check.rule) + ", \"tensors\": {";
  for (std::size_t i = 0; i < check.tensors.size(); ++i) {
    const TensorCheck& t = check.tensors[i];
    json += (i ? ", " : "") + json_string(t.name) + ": {\"passed\": " + json_bool(t.passed) +
            ", \"max_abs_error\": " + json_number(t.max_abs_error) + ", \"rel_error\": " + json_number(t.rel_error) +
            ", \"bound\": " + json_number(t.bound) + ", \"max_abs_ref\": " + json_number(t.max_abs_ref) +
            ", \"nonfinite\": " + std::to_string(t.nonfinite) + "}";
  }
  return json + "}}";
}

}  // namespace

double standard_attention_bytes(const Shape& s, DType element) {
  double entries = 0.0;  // score-matrix entries of one head, over the batch's sequences
  for (std::int64_t b = 0; b < s.batch; ++b) {
    entries += static_cast<double>(s.length_q(b)) * static_cast<double>(s.length_k(b));
  }
  return 2.0 * static_cast<double>(s.heads_q) * entries * static_cast<double>(dtype_size(element));
}

void print_text(const Report& r) {
  const Shape& s = r.shape;
  std::printf("flashcore run: %s%s\n", r.backward ? "forward + backward" : "forward",
              r.deterministic ? " (deterministic)" : "");
  std::printf("  impl      %s on %s (%s)\n", r.impl.c_str(), r.device.c_str(), r.hardware.c_str());
  if (!r.kernels_forward.empty()) {
    std::printf("  kernels   forward %s%s%s\n", r.kernels_forward.c_str(), r.kernels_backward.empty() ? "" : ", backward ",
                r.kernels_backward.c_str());
  }
  std::printf("  shape     batch %lld, seqlen_q %lld, seqlen_k %lld, heads %lld (kv %lld), head_dim %lld, %s%s\n",
              static_cast<long long>(s.batch), static_cast<long long>(s.seqlen_q), static_cast<long long>(s.seqlen_k),
              static_cast<long long>(s.heads_q), static_cast<long long>(s.heads_kv),
              static_cast<long long>(s.head_dim), dtype_name(r.element), s.causal ? ", causal" : "");
  if (s.varlen()) std::printf("  varlen    %s (seqlens above: the max_seqlen bounds)\n", describe_lengths(s).c_str());
  if (s.has_score_options()) {
    std::printf("  options  ");
    if (s.has_window()) {
      std::printf(" window (%lld, %lld)", static_cast<long long>(s.window_left), static_cast<long long>(s.window_right));
    }
    if (s.softcap > 0.0) std::printf(" softcap %g", s.softcap);
    if (s.alibi) std::printf(" alibi (random slopes)");
    if (s.dropout_p > 0.0) std::printf(" dropout %g", s.dropout_p);
    std::printf("\n");
  }
  if (r.element != r.input_dtype) std::printf("            inputs rounded to %s first\n", dtype_name(r.input_dtype));
  if (r.ms) {
    std::printf("  time      median %.4g ms, p90 %.4g ms over %d runs after %d warm-up\n", *r.ms, *r.ms_p90,
                r.repeats, r.warmup);
    const Pass pass = r.backward ? Pass::kForwardBackward : Pass::kForward;
    std::printf("  speed     %.3g TFLOP/s (%.4g GFLOP a pass)\n", tflops(s, pass, *r.ms), flops(s, pass) / 1e9);
    if (r.backward) {
      std::printf("            forward %.4g ms (%.3g TFLOP/s), backward %.4g ms (%.3g TFLOP/s)\n", *r.ms_forward,
                  tflops(s, Pass::kForward, *r.ms_forward), *r.ms_backward,
                  tflops(s, Pass::kBackward, *r.ms_backward));
    }
  } else {
    std::printf("  time      not measured (--repeats 0)\n");
  }
  std::printf("  memory    extra %s (%s)\n",
              r.extra_memory_bytes ? bytes_text(static_cast<double>(*r.extra_memory_bytes)).c_str() : "unknown",
              r.extra_memory_how.c_str());
  std::printf("            standard attention's N x N scores and probabilities: %s\n",
              bytes_text(r.standard_attention_bytes).c_str());
  if (!r.check) return;
  std::printf("  check     against the float64 reference; %s\n", r.check->rule.c_str());
  for (const TensorCheck& t : r.check->tensors) {
    const std::string nonfinite = t.nonfinite ? " (" + std::to_string(t.nonfinite) + " non-finite)" : "";
    std::printf("    %-4s    max abs error %.3e  rel error %.3e  bound %.3e%s  %s\n", t.name.c_str(),
                t.max_abs_error, t.rel_error, t.bound, nonfinite.c_str(), t.passed ? "ok" : "FAIL");
  }
  std::printf("%s\n", r.check->passed ? "PASS" : "FAIL");
}

void print_json(const Report& r) {
  const Shape& s = r.shape;
  const Pass pass = r.backward ? Pass::kForwardBackward : Pass::kForward;
  std::optional<double> pass_tflops;
  std::optional<double> forward_tflops;
  if (r.ms && *r.ms > 0.0) pass_tflops = tflops(s, pass, *r.ms);
  if (r.ms_forward && *r.ms_forward > 0.0) forward_tflops = tflops(s, Pass::kForward, *r.ms_forward);
  std::string json = "{";
  json += "\"impl\": " + json_string(r.impl);
  json += ", \"device\": " + json_string(r.device);
  json += ", \"hardware\": " + json_string(r.hardware);
  json += ", \"kernels_forward\": " + (r.kernels_forward.empty() ? std::string("null") : json_string(r.kernels_forward));
  json += ", \"kernels_backward\": " + (r.kernels_backward.empty() ? std::string("null") : json_string(r.kernels_backward));
  json += ", \"dtype\": " + json_string(dtype_name(r.element));
  json += ", \"input_dtype\": " + json_string(dtype_name(r.input_dtype));
  json += ", \"batch\": " + std::to_string(s.batch);
  json += ", \"heads\": " + std::to_string(s.heads_q);
  json += ", \"heads_kv\": " + std::to_string(s.heads_kv);
  json += ", \"seqlen_q\": " + std::to_string(s.seqlen_q);
  json += ", \"seqlen_k\": " + std::to_string(s.seqlen_k);
  json += ", \"head_dim\": " + std::to_string(s.head_dim);
  json += ", \"causal\": " + json_bool(s.causal);
  json += ", \"window_left\": " + std::to_string(s.window_left);
  json += ", \"window_right\": " + std::to_string(s.window_right);
  json += ", \"softcap\": " + json_number(s.softcap);
  json += ", \"alibi\": " + json_bool(s.alibi);
  json += ", \"dropout_p\": " + json_number(s.dropout_p);
  json += ", \"varlen\": " + json_bool(s.varlen());
  if (s.varlen()) {
    std::string q, k;
    for (std::int64_t b = 0; b < s.batch; ++b) {
      q += (b ? ", " : "") + std::to_string(s.length_q(b));
      k += (b ? ", " : "") + std::to_string(s.length_k(b));
    }
    json += ", \"lengths_q\": [" + q + "], \"lengths_k\": [" + k + "]";
  }
  json += ", \"backward\": " + json_bool(r.backward);
  json += ", \"deterministic\": " + json_bool(r.deterministic);
  json += ", \"repeats\": " + std::to_string(r.repeats);
  json += ", \"warmup\": " + std::to_string(r.warmup);
  json += ", \"ms\": " + json_optional(r.ms);
  json += ", \"ms_p90\": " + json_optional(r.ms_p90);
  json += ", \"ms_forward\": " + json_optional(r.ms_forward);
  json += ", \"ms_backward\": " + json_optional(r.ms_backward);
  json += ", \"flops\": " + json_number(flops(s, pass));
  json += ", \"tflops\": " + json_optional(pass_tflops);
  json += ", \"tflops_forward\": " + json_optional(forward_tflops);
  json += ", \"check\": " + (r.check ? json_check(*r.check) : std::string("null"));
  json += ", \"extra_memory_bytes\": " + json_optional(r.extra_memory_bytes);
  json += ", \"extra_memory_how\": " + json_string(r.extra_memory_how);
  json += ", \"standard_attention_bytes\": " + json_number(r.standard_attention_bytes);
  std::printf("%s}\n", json.c_str());
}

}  // namespace flashcore::cli
