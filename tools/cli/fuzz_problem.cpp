// Drawing, writing, reading and shrinking fuzz problems (fuzz_problem.h).
#include "fuzz_problem.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

namespace flashcore::cli {
namespace {

// splitmix64: a well-mixed 64-bit stream from any seed, the same on every platform (the standard
// library's distributions are not), so a seed names the same problem everywhere.
struct Random {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi] (the modulo bias is far below anything a fuzzer could notice).
  std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }
};

// A seqlen in [1, max]: mostly small or ragged, since tile edges and one-row problems are where
// indexing goes wrong, with some long ones for multi-tile sweeps.
std::int64_t draw_seqlen(Random& r, std::int64_t max) {
  std::int64_t s = 1;
  const std::int64_t pick = r.uniform(0, 99);
  if (pick < 30) {
    s = r.uniform(1, 16);
  } else if (pick < 55) {
    s = r.uniform(17, 300);
  } else if (pick < 75) {  // one off a tile edge either way, or on it
    s = 64 * r.uniform(1, std::max<std::int64_t>(1, max / 64)) + r.uniform(-1, 1);
  } else {  // log-uniform over the whole range
    s = static_cast<std::int64_t>(std::exp(static_cast<double>(r.next() >> 11) * 0x1.0p-53 *
                                           std::log(static_cast<double>(max))));
  }
  return std::clamp<std::int64_t>(s, 1, max);
}

// Every head dim the API accepts: the kernels' list, other multiples of 8, and any other in 1..256.
std::int64_t draw_head_dim(Random& r) {
  static constexpr std::int64_t kKernelHeadDims[] = {32, 64, 96, 128, 192, 256};
  const std::int64_t pick = r.uniform(0, 99);
  if (pick < 40) return kKernelHeadDims[r.uniform(0, 5)];
  if (pick < 65) return 8 * r.uniform(1, 32);
  return r.uniform(1, 256);
}

TensorLayout draw_layout(Random& r) {
  TensorLayout layout;
  const std::int64_t pick = r.uniform(0, 9);
  if (pick < 4) return layout;
  layout.kind = pick < 7 ? LayoutKind::kPadded : LayoutKind::kHeadsMajor;
  // Half the paddings keep 16-byte rows (8 elements), half do not.
  layout.pad = r.chance(0.5) ? 8 : r.uniform(layout.kind == LayoutKind::kPadded ? 1 : 0, 9);
  return layout;
}

// Halves the largest of batch, heads and seqlens until the score matrix fits the cap.
void fit_to_cap(Shape* s, std::int64_t max_elements) {
  while (max_elements > 0 && score_elements(*s) > max_elements) {
    const std::int64_t group = s->heads_q / s->heads_kv;
    if (s->batch > 1) {
      s->batch /= 2;
    } else if (s->heads_kv > 1) {
      s->heads_kv /= 2;
      s->heads_q = s->heads_kv * group;
    } else if (s->heads_q > 1) {
      s->heads_q = std::max<std::int64_t>(1, s->heads_q / 2);
    } else if (s->seqlen_q >= s->seqlen_k) {
      s->seqlen_q = std::max<std::int64_t>(1, s->seqlen_q / 2);
    } else {
      s->seqlen_k = std::max<std::int64_t>(1, s->seqlen_k / 2);
    }
  }
}

const char* layout_kind_name(LayoutKind kind) {
  switch (kind) {
    case LayoutKind::kContiguous: return "contiguous";
    case LayoutKind::kPadded: return "padded";
    case LayoutKind::kHeadsMajor: return "heads_major";
  }
  return "contiguous";
}

std::string layout_name(const TensorLayout& layout) {
  std::string name = layout_kind_name(layout.kind);
  if (layout.kind != LayoutKind::kContiguous) name += "+" + std::to_string(layout.pad);
  return name;
}

bool parse_layout(const std::string& text, TensorLayout* layout) {
  const std::size_t plus = text.find('+');
  const std::string kind = text.substr(0, plus);
  std::int64_t pad = 0;
  if (plus != std::string::npos) {
    const char* begin = text.data() + plus + 1;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(begin, end, pad);
    if (ec != std::errc() || ptr != end || pad < 0 || pad > 4096) return false;
  }
  for (LayoutKind k : {LayoutKind::kContiguous, LayoutKind::kPadded, LayoutKind::kHeadsMajor}) {
    if (kind == layout_kind_name(k)) {
      layout->kind = k;
      layout->pad = k == LayoutKind::kContiguous ? 0 : pad;
      return k != LayoutKind::kContiguous || plus == std::string::npos;
    }
  }
  return false;
}

// At least one query row and one key row in the batch: the library takes no null (empty) q or k,
// while empty sequences among others are what the varlen problems are for.
void keep_rows(Shape* s) {
  if (s->total_q() == 0) s->lengths_q[0] = 1;
  if (s->total_k() == 0) s->lengths_k[0] = 1;
}

// A varlen batch (drawn last, see draw_problem): 1-6 sequences, each length in [0, the drawn
// seqlen] (empty sequences, one-row ones and ragged ones all turn up), the drawn seqlen_q /
// seqlen_k kept as max_seqlen bounds. Lengths are halved until the score entries fit the cap.
void draw_varlen(Random& r, std::int64_t max_elements, Shape* s) {
  s->batch = r.uniform(1, 6);
  s->lengths_q.clear();
  s->lengths_k.clear();
  const auto length = [&](std::int64_t max) {
    const std::int64_t pick = r.uniform(0, 9);
    return pick == 0 ? 0 : pick < 3 ? std::min<std::int64_t>(max, r.uniform(1, 3)) : r.uniform(1, max);
  };
  for (std::int64_t b = 0; b < s->batch; ++b) {
    const std::int64_t q = length(s->seqlen_q);
    s->lengths_q.push_back(q);
    s->lengths_k.push_back(s->seqlen_q == s->seqlen_k && r.chance(0.5) ? q : length(s->seqlen_k));
  }
  while (max_elements > 0 && score_elements(*s) > max_elements) {
    for (std::int64_t& q : s->lengths_q) q /= 2;
    for (std::int64_t& k : s->lengths_k) k /= 2;
  }
  keep_rows(s);
}

// Lengths kept consistent with a (possibly shrunk) batch and max_seqlen bounds.
void fit_lengths(Shape* s) {
  if (!s->varlen()) return;
  s->lengths_q.resize(static_cast<std::size_t>(s->batch), 0);
  s->lengths_k.resize(static_cast<std::size_t>(s->batch), 0);
  for (std::int64_t& q : s->lengths_q) q = std::min(q, s->seqlen_q);
  for (std::int64_t& k : s->lengths_k) k = std::min(k, s->seqlen_k);
  keep_rows(s);
}

std::string lengths_text(const std::vector<std::int64_t>& lengths, char separator) {
  std::string text;
  for (std::size_t b = 0; b < lengths.size(); ++b) text += (b ? std::string(1, separator) : "") + std::to_string(lengths[b]);
  return text;
}

// "3:0:17" into lengths; false on anything else.
bool parse_lengths(const std::string& text, std::vector<std::int64_t>* lengths) {
  lengths->clear();
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t colon = std::min(text.find(':', begin), text.size());
    std::int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + begin, text.data() + colon, value);
    if (colon == begin || ec != std::errc() || ptr != text.data() + colon || value < 0 || value > (1 << 24)) {
      return false;
    }
    lengths->push_back(value);
    begin = colon + 1;
  }
  return true;
}

}  // namespace

std::uint64_t problem_seed(std::uint64_t seed, std::int64_t index) {
  Random r{seed ^ (0xD1B54A32D192ED03ull * static_cast<std::uint64_t>(index + 1))};
  return r.next();
}

std::int64_t score_elements(const Shape& s) {
  if (!s.varlen()) return s.batch * s.heads_q * s.seqlen_q * s.seqlen_k;
  std::int64_t entries = 0;
  for (std::int64_t b = 0; b < s.batch; ++b) entries += s.length_q(b) * s.length_k(b);
  return s.heads_q * entries;
}

FuzzProblem draw_problem(std::uint64_t seed, const FuzzLimits& limits) {
  Random r{seed};
  FuzzProblem p;
  Shape& s = p.shape;
  const std::int64_t batch_pick = r.uniform(0, 9);
  s.batch = batch_pick < 6 ? 1 : batch_pick < 9 ? 2 : r.uniform(3, 4);
  s.seqlen_q = draw_seqlen(r, limits.max_seqlen);
  s.seqlen_k = r.chance(0.35) ? s.seqlen_q : draw_seqlen(r, limits.max_seqlen);
  const std::int64_t heads_pick = r.uniform(0, 99);
  if (heads_pick < 40) {  // MHA
    s.heads_kv = r.uniform(1, 4);
    s.heads_q = s.heads_kv;
  } else if (heads_pick < 65) {  // MQA
    s.heads_kv = 1;
    s.heads_q = r.uniform(2, 8);
  } else {  // GQA
    s.heads_kv = r.uniform(2, 4);
    s.heads_q = s.heads_kv * r.uniform(2, 4);
  }
  s.head_dim = draw_head_dim(r);
  s.causal = r.chance(0.5);
  p.dtype = r.chance(0.5) ? DType::kFloat16 : DType::kBFloat16;
  p.backward = r.chance(0.5);
  p.inputs = draw_layout(r);
  p.outputs = draw_layout(r);
  p.input_seed = r.next() >> 16;  // fits the run command's --seed in any integer parser
  p.deterministic = p.backward && r.chance(0.3);  // drawn last: earlier draws keep their values
  fit_to_cap(&s, limits.max_elements);
  // Score options, drawn last so the fields above stay what a seed drew before they existed: a
  // sliding window (narrow ones most, so whole tiles are skipped), softcap, ALiBi.
  if (r.chance(0.3)) {
    const auto bound = [&](std::int64_t seqlen) {
      const std::int64_t pick = r.uniform(0, 9);
      return pick < 3 ? -1 : pick < 7 ? r.uniform(0, 32) : r.uniform(0, seqlen);
    };
    s.window_left = bound(s.seqlen_k);
    s.window_right = s.causal ? -1 : bound(s.seqlen_q);
  }
  if (r.chance(0.2)) s.softcap = static_cast<double>(r.uniform(1, 500)) / 10.0;  // 0.1 .. 50
  s.alibi = r.chance(0.2);
  // Dropout, drawn after the score options for the same reason; its Philox key is the input seed.
  if (r.chance(0.15)) s.dropout_p = static_cast<double>(r.uniform(1, 90)) / 100.0;  // 0.01 .. 0.9
  s.dropout_seed = p.input_seed;
  if (!limits.score_options) {
    s.window_left = s.window_right = -1;
    s.softcap = 0.0;
    s.alibi = false;
    s.dropout_p = 0.0;
  }
  // Varlen, drawn after everything else for the same reason (the packed layout is then a
  // (1, total, heads, head_dim) tensor in the drawn layout, viewed as (total, heads, head_dim)).
  if (limits.varlen && r.chance(0.2)) draw_varlen(r, limits.max_elements, &s);
  return p;
}

std::string problem_spec(const FuzzProblem& p) {
  const Shape& s = p.shape;
  std::ostringstream out;
  out << "batch=" << s.batch << ",seqlen_q=" << s.seqlen_q << ",seqlen_k=" << s.seqlen_k << ",heads=" << s.heads_q
      << ",heads_kv=" << s.heads_kv << ",head_dim=" << s.head_dim
      << ",dtype=" << (p.dtype == DType::kBFloat16 ? "bf16" : "fp16") << ",causal=" << (s.causal ? 1 : 0)
      << ",backward=" << (p.backward ? 1 : 0) << ",deterministic=" << (p.deterministic ? 1 : 0)
      << ",inputs=" << layout_name(p.inputs) << ",outputs=" << layout_name(p.outputs) << ",seed=" << p.input_seed;
  // Score options only when set, so a spec written before they existed still reads the same.
  if (s.window_left >= 0 || s.window_right >= 0) out << ",window=" << s.window_left << ":" << s.window_right;
  if (s.softcap > 0.0) out << ",softcap=" << s.softcap;
  if (s.alibi) out << ",alibi=1";
  if (s.dropout_p > 0.0) out << ",dropout=" << s.dropout_p;
  if (s.varlen()) out << ",lengths_q=" << lengths_text(s.lengths_q, ':') << ",lengths_k=" << lengths_text(s.lengths_k, ':');
  return out.str();
}

std::string parse_problem_spec(const std::string& spec, FuzzProblem* problem) {
  std::map<std::string, std::string> fields;
  std::istringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    const std::size_t equals = item.find('=');
    if (equals == std::string::npos) return "--problem: expected key=value, got '" + item + "'";
    fields[item.substr(0, equals)] = item.substr(equals + 1);
  }
  FuzzProblem p;
  Shape& s = p.shape;
  struct IntField {
    const char* name;
    std::int64_t* value;
    std::int64_t min, max;
  };
  std::int64_t causal = 0, backward = 0;
  const IntField ints[] = {{"batch", &s.batch, 1, 1 << 16},         {"seqlen_q", &s.seqlen_q, 1, 1 << 24},
                           {"seqlen_k", &s.seqlen_k, 1, 1 << 24},   {"heads", &s.heads_q, 1, 4096},
                           {"heads_kv", &s.heads_kv, 1, 4096},      {"head_dim", &s.head_dim, 1, 256},
                           {"causal", &causal, 0, 1},               {"backward", &backward, 0, 1}};
  for (const IntField& f : ints) {
    const auto it = fields.find(f.name);
    if (it == fields.end()) return std::string("--problem: missing ") + f.name;
    const char* end = it->second.data() + it->second.size();
    const auto [ptr, ec] = std::from_chars(it->second.data(), end, *f.value);
    if (ec != std::errc() || ptr != end || *f.value < f.min || *f.value > f.max) {
      return std::string("--problem: ") + f.name + ": expected an integer in [" + std::to_string(f.min) + ", " +
             std::to_string(f.max) + "], got '" + it->second + "'";
    }
    fields.erase(it);
  }
  if (s.heads_q % s.heads_kv != 0) return "--problem: heads must be a multiple of heads_kv";
  s.causal = causal != 0;
  p.backward = backward != 0;
  if (const auto it = fields.find("deterministic"); it != fields.end()) {  // optional, default 0
    if (it->second != "0" && it->second != "1") return "--problem: deterministic: expected 0 or 1";
    p.deterministic = it->second == "1";
    if (p.deterministic && !p.backward) return "--problem: deterministic=1 needs backward=1";
    fields.erase(it);
  }
  const std::string dtype = fields.count("dtype") ? fields["dtype"] : "";
  if (dtype != "fp16" && dtype != "bf16") return "--problem: dtype: expected fp16 or bf16, got '" + dtype + "'";
  p.dtype = dtype == "bf16" ? DType::kBFloat16 : DType::kFloat16;
  if (!parse_layout(fields.count("inputs") ? fields["inputs"] : "", &p.inputs)) {
    return "--problem: inputs: expected contiguous, padded+N or heads_major+N";
  }
  if (!parse_layout(fields.count("outputs") ? fields["outputs"] : "", &p.outputs)) {
    return "--problem: outputs: expected contiguous, padded+N or heads_major+N";
  }
  const std::string seed = fields.count("seed") ? fields["seed"] : "";
  const auto [ptr, ec] = std::from_chars(seed.data(), seed.data() + seed.size(), p.input_seed);
  if (seed.empty() || ec != std::errc() || ptr != seed.data() + seed.size()) {
    return "--problem: seed: expected an unsigned integer, got '" + seed + "'";
  }
  for (const char* known : {"dtype", "inputs", "outputs", "seed"}) fields.erase(known);
  if (const auto it = fields.find("window"); it != fields.end()) {
    const std::string& w = it->second;
    const std::size_t colon = w.find(':');
    const char* end = w.data() + w.size();
    std::from_chars_result left{}, right{};
    if (colon != std::string::npos) {
      left = std::from_chars(w.data(), w.data() + colon, s.window_left);
      right = std::from_chars(w.data() + colon + 1, end, s.window_right);
    }
    if (colon == std::string::npos || left.ec != std::errc() || left.ptr != w.data() + colon ||
        right.ec != std::errc() || right.ptr != end || s.window_left < -1 || s.window_right < -1) {
      return "--problem: window: expected L:R with each -1 or at least 0, got '" + w + "'";
    }
    fields.erase(it);
  }
  if (const auto it = fields.find("softcap"); it != fields.end()) {
    char* end = nullptr;
    s.softcap = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || end != it->second.c_str() + it->second.size() || !std::isfinite(s.softcap) ||
        s.softcap < 0.0) {
      return "--problem: softcap: expected a finite number >= 0, got '" + it->second + "'";
    }
    fields.erase(it);
  }
  if (const auto it = fields.find("alibi"); it != fields.end()) {
    if (it->second != "0" && it->second != "1") return "--problem: alibi: expected 0 or 1, got '" + it->second + "'";
    s.alibi = it->second == "1";
    fields.erase(it);
  }
  if (const auto it = fields.find("dropout"); it != fields.end()) {
    char* end = nullptr;
    s.dropout_p = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || end != it->second.c_str() + it->second.size() || !std::isfinite(s.dropout_p) ||
        s.dropout_p < 0.0 || s.dropout_p >= 1.0) {
      return "--problem: dropout: expected a probability in [0, 1), got '" + it->second + "'";
    }
    fields.erase(it);
  }
  s.dropout_seed = p.input_seed;
  if (fields.count("lengths_q") != fields.count("lengths_k")) return "--problem: lengths_q and lengths_k go together";
  if (fields.count("lengths_q")) {
    if (!parse_lengths(fields["lengths_q"], &s.lengths_q) || !parse_lengths(fields["lengths_k"], &s.lengths_k)) {
      return "--problem: lengths_q / lengths_k: expected lengths separated by ':' (e.g. 3:0:17)";
    }
    const std::int64_t count = static_cast<std::int64_t>(s.lengths_q.size());
    if (static_cast<std::int64_t>(s.lengths_k.size()) != count || count != s.batch) {
      return "--problem: lengths_q and lengths_k must list batch (" + std::to_string(s.batch) + ") lengths each";
    }
    for (std::int64_t b = 0; b < count; ++b) {
      if (s.lengths_q[b] > s.seqlen_q || s.lengths_k[b] > s.seqlen_k) {
        return "--problem: lengths_q / lengths_k: a length above seqlen_q / seqlen_k (the max_seqlen bounds)";
      }
    }
    fields.erase("lengths_q");
    fields.erase("lengths_k");
  }
  if (!fields.empty()) return "--problem: unknown field '" + fields.begin()->first + "'";
  *problem = p;
  return "";
}

std::string describe(const FuzzProblem& p) {
  const Shape& s = p.shape;
  std::ostringstream out;
  out << "b" << s.batch << " sq" << s.seqlen_q << " sk" << s.seqlen_k << " hq" << s.heads_q << " hkv" << s.heads_kv
      << " d" << s.head_dim << " " << (p.dtype == DType::kBFloat16 ? "bf16" : "fp16") << (s.causal ? " causal" : "")
      << (p.backward ? " fwd+bwd" : " fwd") << (p.deterministic ? " deterministic" : "")
      << " in=" << layout_name(p.inputs) << " out=" << layout_name(p.outputs);
  if (s.window_left >= 0 || s.window_right >= 0) out << " window=" << s.window_left << "," << s.window_right;
  if (s.softcap > 0.0) out << " softcap=" << s.softcap;
  if (s.alibi) out << " alibi";
  if (s.dropout_p > 0.0) out << " dropout=" << s.dropout_p;
  if (s.varlen()) out << " varlen q=" << lengths_text(s.lengths_q, '/') << " k=" << lengths_text(s.lengths_k, '/');
  return out.str();
}

std::string run_flags(const FuzzProblem& p) {
  const Shape& s = p.shape;
  std::ostringstream out;
  if (s.varlen()) {  // the lengths as Q:K pairs; --seqlen / --seqlen-k below keep the bounds
    out << "--varlen ";
    for (std::int64_t b = 0; b < s.batch; ++b) out << (b ? "," : "") << s.lengths_q[b] << ":" << s.lengths_k[b];
    out << " ";
  } else {
    out << "--batch " << s.batch << " ";
  }
  out << "--seqlen " << s.seqlen_q << " --seqlen-k " << s.seqlen_k << " --heads "
      << s.heads_q << " --heads-kv " << s.heads_kv << " --head-dim " << s.head_dim << " --dtype "
      << (p.dtype == DType::kBFloat16 ? "bf16" : "fp16") << (s.causal ? " --causal" : "")
      << (p.backward ? " --backward" : "") << (p.deterministic ? " --deterministic" : "") << " --seed "
      << p.input_seed;
  if (s.window_left >= 0 || s.window_right >= 0) out << " --window " << s.window_left << "," << s.window_right;
  if (s.softcap > 0.0) out << " --softcap " << s.softcap;
  if (s.alibi) out << " --alibi";
  if (s.dropout_p > 0.0) out << " --dropout " << s.dropout_p;
  out << " --repeats 0 --warmup 0 --check";
  return out.str();
}

std::vector<FuzzProblem> smaller_problems(const FuzzProblem& p) {
  std::vector<FuzzProblem> out;
  const auto with = [&](auto change) {
    FuzzProblem c = p;
    change(c);
    out.push_back(c);
  };
  const Shape& s = p.shape;
  if (s.batch > 1) with([](FuzzProblem& c) { c.shape.batch /= 2; });
  if (s.heads_kv > 1) {
    with([](FuzzProblem& c) {
      const std::int64_t group = c.shape.heads_q / c.shape.heads_kv;
      c.shape.heads_kv /= 2;
      c.shape.heads_q = c.shape.heads_kv * group;
    });
  }
  if (s.heads_q > s.heads_kv) {
    with([](FuzzProblem& c) {
      const std::int64_t group = c.shape.heads_q / c.shape.heads_kv;
      c.shape.heads_q = c.shape.heads_kv * std::max<std::int64_t>(1, group / 2);
    });
  }
  if (s.seqlen_q > 1) with([](FuzzProblem& c) { c.shape.seqlen_q /= 2; });
  if (s.seqlen_k > 1) with([](FuzzProblem& c) { c.shape.seqlen_k /= 2; });
  if (s.seqlen_q > 1 && s.seqlen_k > 1) {  // both at once keeps the Sq:Sk ratio causal masks depend on
    with([](FuzzProblem& c) {
      c.shape.seqlen_q /= 2;
      c.shape.seqlen_k /= 2;
    });
  }
  if (s.head_dim > 1) with([](FuzzProblem& c) { c.shape.head_dim /= 2; });
  if (s.head_dim > 8 && (s.head_dim / 2) % 8 != 0) {  // and to a multiple of 8: the kernels' direct path
    with([](FuzzProblem& c) { c.shape.head_dim = (c.shape.head_dim / 2 + 7) / 8 * 8; });
  }
  if (p.deterministic) with([](FuzzProblem& c) { c.deterministic = false; });
  if (p.backward) {
    with([](FuzzProblem& c) {
      c.backward = false;
      c.deterministic = false;
    });
  }
  if (s.causal) with([](FuzzProblem& c) { c.shape.causal = false; });
  if (s.window_left >= 0 || s.window_right >= 0) {
    with([](FuzzProblem& c) { c.shape.window_left = c.shape.window_right = -1; });
  }
  if (s.softcap > 0.0) with([](FuzzProblem& c) { c.shape.softcap = 0.0; });
  if (s.alibi) with([](FuzzProblem& c) { c.shape.alibi = false; });
  if (s.dropout_p > 0.0) with([](FuzzProblem& c) { c.shape.dropout_p = 0.0; });
  if (p.inputs.kind != LayoutKind::kContiguous) with([](FuzzProblem& c) { c.inputs = TensorLayout{}; });
  if (p.outputs.kind != LayoutKind::kContiguous) with([](FuzzProblem& c) { c.outputs = TensorLayout{}; });
  if (s.varlen()) {
    with([](FuzzProblem& c) {  // dense instead, each sequence padded to the bounds
      c.shape.lengths_q.clear();
      c.shape.lengths_k.clear();
    });
    with([](FuzzProblem& c) {
      for (std::int64_t& q : c.shape.lengths_q) q /= 2;
      for (std::int64_t& k : c.shape.lengths_k) k /= 2;
    });
  }
  for (FuzzProblem& c : out) fit_lengths(&c.shape);  // batch and seqlen halvings carry into the lengths
  return out;
}

void layout_strides(const TensorLayout& layout, std::int64_t batch, std::int64_t seqlen, std::int64_t heads,
                    std::int64_t head_dim, std::int64_t strides[4], std::int64_t* storage_elements) {
  const std::int64_t pad = layout.kind == LayoutKind::kContiguous ? 0 : layout.pad;
  strides[3] = 1;
  if (layout.kind == LayoutKind::kHeadsMajor) {  // memory (batch, heads, seqlen, head_dim + pad)
    strides[1] = head_dim + pad;
    strides[2] = seqlen * strides[1];
    strides[0] = heads * strides[2];
  } else {  // memory (batch, seqlen, heads, head_dim), each stride padded
    strides[2] = head_dim + pad;
    strides[1] = heads * strides[2] + pad;
    strides[0] = seqlen * strides[1] + pad;
  }
  *storage_elements = batch * strides[0];
}

}  // namespace flashcore::cli
