// Per-stream learning of line prefixes that the catalogue does not list (see normalize.hpp).
#include <re2/re2.h>

#include <array>
#include <cctype>
#include <cstring>

#include "firstfault/normalize.hpp"
#include "kb_data/tables.hpp"

namespace ff::normalize {

namespace {
// RE2's \w and \s (ASCII only, as RE2's are) and the token class [\w.@-], the classes as a table: the
// token scan runs on every line (a class test per byte was a quarter of its cost).
struct byte_classes {
  bool word[256] = {}, token[256] = {};
  constexpr byte_classes() {
    for (int c = 0; c < 256; ++c) {
      word[c] = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
      token[c] = word[c] || c == '.' || c == '@' || c == '-';
    }
  }
};
constexpr byte_classes kClasses;
bool word_char(char c) { return kClasses.word[static_cast<unsigned char>(c)]; }
bool space_char(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'; }
bool token_char(char c) { return kClasses.token[static_cast<unsigned char>(c)]; }

constexpr std::size_t kTokenWindow = prefix_learner::kTokenWindow;

// The token's extent by the regexp; `in` is at most kTokenWindow bytes.
std::size_t token_by_regex(std::string_view in) {
  static const re2::RE2 tok(R"(^(\[[^\[\]\s]{1,48}\](?:<\w{1,8}>)?:? ?|[\w.@-]{1,48}: |[\w.@-]{1,48} \| ))");
  re2::StringPiece sp(in.data(), in.size()), m;
  return re2::RE2::PartialMatch(sp, tok, &m) ? m.size() : 0;
}

// The same extent by hand: each alternative is deterministic (every repeated class excludes the byte
// that ends it), so leftmost-first is "the first alternative that fits, each optional part taken when
// present". extract_test compares the two on generated tokens. Only the bracket form's `[^\[\]\s]{1,48}`
// counts characters where a byte of 0x80 or more can stand (UTF-8): RE2's \w is ASCII, so a non-ASCII
// byte ends the other runs for both. `*non_ascii` is set when the bracket run meets one (the regexp decides).
std::size_t token_by_hand(std::string_view in, bool* non_ascii) {
  std::size_t n = in.size();
  if (n > 0 && in[0] == '[') {
    std::size_t k = 1;
    while (k < n && in[k] != '[' && in[k] != ']' && !space_char(in[k])) {
      if (static_cast<unsigned char>(in[k]) >= 0x80) {
        *non_ascii = true;
        return 0;
      }
      ++k;
    }
    if (k < n && in[k] == ']' && k - 1 >= 1 && k - 1 <= 48) {
      std::size_t e = k + 1;
      if (e < n && in[e] == '<') {
        std::size_t j = e + 1;
        while (j < n && word_char(in[j])) ++j;
        if (j < n && in[j] == '>' && j - e - 1 >= 1 && j - e - 1 <= 8) e = j + 1;
      }
      if (e < n && in[e] == ':') ++e;
      if (e < n && in[e] == ' ') ++e;
      return e;
    }
  }
  std::size_t k = 0;
  while (k < n && token_char(in[k])) ++k;
  if (k < 1 || k > 48) return 0;
  if (k + 1 < n && in[k] == ':' && in[k + 1] == ' ') return k + 2;
  if (k + 2 < n && in[k] == ' ' && in[k + 1] == '|' && in[k + 2] == ' ') return k + 3;
  return 0;
}

bool ascii(std::string_view s) {
  std::size_t i = 0;
  std::uint64_t high = 0;
  for (; i + 8 <= s.size(); i += 8) {  // eight bytes at a time: this runs on every line's first 64 bytes
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    high |= w;
  }
  if (high & 0x8080808080808080ull) return false;
  for (; i < s.size(); ++i)
    if (static_cast<unsigned char>(s[i]) >= 0x80) return false;
  return true;
}

// A token holding a message word (kb/_tables/message_words.tsv) is the message, not a prefix ("ERROR: ", "[WARN]").
const std::vector<std::string>& message_words() {
  static const std::vector<std::string> kWords = [] {  // kb/_tables/message_words.tsv
    std::vector<std::string> out;
    const auto& tab = kb::detail::embedded_table("message_words");
    if (const int w = tab.column("word"); w >= 0)
      for (const auto& r : tab.rows) out.push_back(r[static_cast<std::size_t>(w)]);
    return out;
  }();
  return kWords;
}

// The same words as one case-insensitive RE2 alternation, for tokens that are not plain ASCII.
const re2::RE2& message_words_re() {
  static const re2::RE2 re([] {
    std::string alt;
    for (const auto& w : message_words()) alt += (alt.empty() ? "" : "|") + re2::RE2::QuoteMeta(w);
    return "(?i)" + (alt.empty() ? std::string(R"([^\s\S])") : alt);
  }());
  return re;
}

bool has_message_word(std::string_view t) {
  const auto& kWords = message_words();
  for (std::size_t i = 0; i < t.size(); ++i)
    for (const auto& w : kWords) {
      if (i + w.size() > t.size()) continue;
      std::size_t j = 0;
      while (j < w.size() && std::tolower(static_cast<unsigned char>(t[i + j])) == w[j]) ++j;
      if (j == w.size()) return true;
    }
  return false;
}
}  // namespace

std::size_t detail::leading_token_extent(std::string_view line, bool by_regex) {
  std::string_view in = line.substr(0, kTokenWindow);
  // Every token starts with '[' or a [\w.@-] byte (RE2's \w is ASCII): a body that starts otherwise has none.
  if (in.empty() || (in[0] != '[' && !token_char(in[0]))) return 0;
  if (by_regex) return token_by_regex(in);
  bool non_ascii = false;
  std::size_t len = token_by_hand(in, &non_ascii);
  return non_ascii ? token_by_regex(in) : len;
}

std::pair<std::string_view, std::string> leading_token(std::string_view line) {
  // Shapes a wrapper adds: "[anything]" (":"/space after), "word: ", "word | ", "[n]<stream>".
  std::size_t len = detail::leading_token_extent(line, false);
  if (len == 0) return {};
  std::string_view t = line.substr(0, len);
  if (t.size() >= line.size()) return {};  // the token is the whole line: nothing to peel off
  // (?i) on ASCII text folds ASCII letters only (RE2's other folds, such as U+017F to 's', need a
  // non-ASCII byte, and such tokens take the regexp).
  if (ascii(t) ? has_message_word(t) : re2::RE2::PartialMatch(re2::StringPiece(t.data(), t.size()), message_words_re()))
    return {};
  bool digit = false;
  std::string shape;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(t[i]))) {
      digit = true;
      if (shape.empty() || shape.back() != '#') shape += '#';
    } else {
      shape += t[i];
    }
  }
  // A bare word is a message ("Epoch: 3"), not a prefix: a learnt token has a number or brackets.
  if (!digit && t[0] != '[') return {};
  return {t, shape};
}

namespace {
// The digit runs of a token, in order (each run's value, its first 9 digits). A token is at most
// kTokenWindow bytes, so it holds at most kTokenWindow / 2 runs: a fixed array, no allocation per line.
struct token_numbers {
  std::array<long, kTokenWindow / 2 + 1> v{};
  std::size_t n = 0;
};
token_numbers numbers_in(std::string_view t) {
  token_numbers out;
  for (std::size_t i = 0; i < t.size();) {
    if (!std::isdigit(static_cast<unsigned char>(t[i]))) { ++i; continue; }
    long v = 0;
    std::size_t j = i;
    for (; j < t.size() && std::isdigit(static_cast<unsigned char>(t[j])); ++j) v = j - i < 9 ? v * 10 + (t[j] - '0') : v;
    if (out.n < out.v.size()) out.v[out.n++] = v;
    i = j;
  }
  return out;
}
}  // namespace

void prefix_learner::count(std::string_view t, const std::string& shape) { count_stats(t, shape); }

prefix_learner::shape_stats* prefix_learner::count_stats(std::string_view t, const std::string& shape) {
  ++lines_;
  if (t.empty()) return nullptr;
  auto it = shapes_.find(shape);
  if (it == shapes_.end()) {
    if (shapes_.size() >= 64) return nullptr;  // bounded: a log of random tokens learns nothing
    it = shapes_.emplace(shape, shape_stats{}).first;
  }
  auto& st = it->second;
  ++st.lines;
  const auto nums = numbers_in(t);
  st.numbers = static_cast<int>(nums.n);
  st.values.resize(nums.n);
  for (std::size_t i = 0; i < nums.n; ++i)
    if (st.values[i].size() < 4097) st.values[i].insert(nums.v[i]);
  return &st;
}

bool prefix_learner::would_peel(std::size_t token_len, const std::string& shape) const {
  if (token_len == 0) return false;
  auto it = shapes_.find(shape);
  if (it == shapes_.end() && shapes_.size() >= 64) return false;  // count_stats() would not count it
  // after count_stats(): the shape's lines and all lines one more each
  return frequent((it == shapes_.end() ? 0 : it->second.lines) + 1, lines_ + 1);
}

bool prefix_learner::frequent(std::size_t shape_lines, std::size_t all_lines) {
  return shape_lines >= static_cast<std::size_t>(kMinLines) && static_cast<double>(shape_lines) >= kMinShare * static_cast<double>(all_lines);
}

void prefix_learner::observe(std::string_view line) {
  const auto tok = leading_token(line);
  count(tok.first, tok.second);
}

bool prefix_learner::observe_and_peel(std::string_view line, line_meta& out, std::string_view& rest) {
  // The collector observes every line and then peels it: one token for both (a memo of the last line's
  // token, compared and copied on every line, cost more than the token).
  const auto tok = leading_token(line);
  return observe_and_peel(line, tok.first.size(), tok.second, out, rest);
}

bool prefix_learner::observe_and_peel(std::string_view line, std::size_t token_len, const std::string& shape, line_meta& out,
                                      std::string_view& rest) {
  const std::string_view t = line.substr(0, token_len);
  // one lookup of the shape for both (a token counted is a shape known; one not counted, past the table's
  // bound or empty, peel_token() would not find either)
  const shape_stats* st = count_stats(t, shape);
  return st && peel_stats(line, t, *st, out, rest);
}

bool prefix_learner::peel(std::string_view line, line_meta& out, std::string_view& rest) const {
  const auto tok = leading_token(line);
  return peel_token(line, tok.first, tok.second, out, rest);
}

bool prefix_learner::peel_token(std::string_view line, std::string_view t, const std::string& shape, line_meta& out,
                                std::string_view& rest) const {
  if (t.empty()) return false;
  auto it = shapes_.find(shape);
  if (it == shapes_.end()) return false;
  return peel_stats(line, t, it->second, out, rest);
}

bool prefix_learner::peel_stats(std::string_view line, std::string_view t, const shape_stats& st, line_meta& out,
                                std::string_view& rest) const {
  if (!frequent(st.lines, lines_)) return false;
  rest = line.substr(t.size());
  // The rank: the one digit run that varies, if it stays small and does not change on every line.
  int varying = -1, n_varying = 0;
  for (std::size_t i = 0; i < st.values.size(); ++i)
    if (st.values[i].size() > 1) { varying = static_cast<int>(i); ++n_varying; }
  if (n_varying == 1 && !out.rank) {
    const auto& vals = st.values[static_cast<std::size_t>(varying)];
    // Ranks count from 0: a set of values far from 0 (pids, ports, years) is not ranks.
    bool small = *vals.rbegin() < 65536 && *vals.begin() <= static_cast<long>(2 * vals.size());
    bool not_a_counter = vals.size() * 2 <= st.lines;  // line numbers and pids change on (almost) every line
    const auto nums = numbers_in(t);
    if (small && not_a_counter && static_cast<std::size_t>(varying) < nums.n) out.rank = static_cast<int>(nums.v[static_cast<std::size_t>(varying)]);
  }
  return true;
}

}  // namespace ff::normalize
