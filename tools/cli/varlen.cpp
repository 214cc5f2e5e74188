// Sequences of a packed batch, --varlen's parsing and random lengths, and the per-sequence slicing
// the checks use (varlen.h).
#include "varlen.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace flashcore::cli {
namespace {

// Every length a sequence may have: int32 offsets, and the CLI's per-dimension limit.
constexpr std::int64_t kMaxLength = std::int64_t{1} << 24;
constexpr std::size_t kMaxSequences = 65536;

bool parse_length(std::string_view text, std::int64_t* value) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return !text.empty() && ec == std::errc() && ptr == text.data() + text.size() && *value >= 0 &&
         *value <= kMaxLength;
}

// splitmix64, as the fuzzer's draws: the same lengths from a seed on every platform.
std::uint64_t next_random(std::uint64_t* state) {
  std::uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<Sequence> sequences(const Shape& shape) {
  std::vector<Sequence> result;
  std::int64_t q_row = 0, k_row = 0;
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    const Sequence seq{b, q_row, k_row, shape.length_q(b), shape.length_k(b)};
    result.push_back(seq);
    q_row += seq.len_q;
    k_row += seq.len_k;
  }
  return result;
}

std::vector<double> cu_seqlens(const std::vector<std::int64_t>& lengths) {
  std::vector<double> offsets(1, 0.0);
  for (std::int64_t length : lengths) offsets.push_back(offsets.back() + static_cast<double>(length));
  return offsets;
}

std::string parse_varlen_list(std::string_view value, std::vector<std::int64_t>* lengths_q,
                              std::vector<std::int64_t>* lengths_k) {
  lengths_q->clear();
  lengths_k->clear();
  const std::string expected = "--varlen: expected 'random' or a comma-separated list of lengths N or Q:K "
                               "(each 0.." + std::to_string(kMaxLength) + ", e.g. 100,37:60,0), got '" +
                               std::string(value) + "'";
  std::size_t begin = 0;
  while (begin <= value.size()) {
    const std::size_t comma = std::min(value.find(',', begin), value.size());
    const std::string_view item = value.substr(begin, comma - begin);
    const std::size_t colon = item.find(':');
    std::int64_t q = 0, k = 0;
    const bool ok = colon == std::string_view::npos
                        ? parse_length(item, &q) && parse_length(item, &k)
                        : parse_length(item.substr(0, colon), &q) && parse_length(item.substr(colon + 1), &k);
    if (!ok || lengths_q->size() == kMaxSequences) return expected;
    lengths_q->push_back(q);
    lengths_k->push_back(k);
    begin = comma + 1;
  }
  return "";
}

void draw_random_lengths(std::int64_t batch, std::int64_t max_q, std::int64_t max_k, std::uint64_t seed,
                         std::vector<std::int64_t>* lengths_q, std::vector<std::int64_t>* lengths_k) {
  std::uint64_t state = seed ^ 0x7661726C656E73ull;  // "varlens": its own stream beside the inputs'
  lengths_q->clear();
  lengths_k->clear();
  for (std::int64_t b = 0; b < batch; ++b) {
    lengths_q->push_back(1 + static_cast<std::int64_t>(next_random(&state) % static_cast<std::uint64_t>(max_q)));
    lengths_k->push_back(1 + static_cast<std::int64_t>(next_random(&state) % static_cast<std::uint64_t>(max_k)));
  }
}

ReferenceProblem reference_problem(const Shape& s, const HostInputs& in, float softmax_scale) {
  ReferenceProblem p;
  p.batch = s.batch;
  p.seqlen_q = s.seqlen_q;
  p.seqlen_k = s.seqlen_k;
  p.heads_q = s.heads_q;
  p.heads_kv = s.heads_kv;
  p.head_dim = s.head_dim;
  p.causal = s.causal;
  p.softmax_scale = softmax_scale;
  p.window_left = s.window_left;
  p.window_right = s.window_right;
  p.softcap = static_cast<double>(static_cast<float>(s.softcap));  // the float the library is given
  p.dropout_p = static_cast<double>(static_cast<float>(s.dropout_p));
  p.dropout_seed = s.dropout_seed;
  if (!in.alibi_slopes.empty()) {
    p.alibi_slopes = in.alibi_slopes.data();
    p.alibi_slopes_per_batch = true;
  }
  return p;
}

ReferenceProblem sequence_problem(const ReferenceProblem& whole, const Sequence& seq, const HostInputs& in) {
  ReferenceProblem p = whole;
  p.batch = 1;
  p.seqlen_q = seq.len_q;
  p.seqlen_k = seq.len_k;
  p.dropout_first_batch = seq.index;  // the stream is keyed by the sequence's index in the batch
  if (!in.alibi_slopes.empty()) {
    p.alibi_slopes = in.alibi_slopes.data() + seq.index * whole.heads_q;
    p.alibi_slopes_per_batch = false;
  }
  return p;
}

std::vector<double> take_rows(const std::vector<double>& packed, std::int64_t row0, std::int64_t rows,
                              std::int64_t width) {
  const auto first = packed.begin() + row0 * width;
  return std::vector<double>(first, first + rows * width);
}

void put_rows(const std::vector<double>& rows, std::int64_t row0, std::int64_t width, std::vector<double>* packed) {
  std::copy(rows.begin(), rows.end(), packed->begin() + row0 * width);
}

void put_lse(const std::vector<double>& lse, const Sequence& seq, std::int64_t heads, std::int64_t total_q,
             std::vector<double>* packed) {
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t i = 0; i < seq.len_q; ++i) {
      (*packed)[static_cast<std::size_t>(h * total_q + seq.q_row + i)] = lse[static_cast<std::size_t>(h * seq.len_q + i)];
    }
  }
}

std::string describe_lengths(const Shape& s) {
  std::string q, k;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    q += (b ? "/" : "") + std::to_string(s.length_q(b));
    k += (b ? "/" : "") + std::to_string(s.length_k(b));
  }
  return std::to_string(s.batch) + (s.batch == 1 ? " sequence" : " sequences") + ", q " + q + ", k " + k;
}

}  // namespace flashcore::cli
