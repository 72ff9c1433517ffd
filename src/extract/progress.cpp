// Progress facts from a line body (extract.hpp): the step a rank reached and the steps it planned.
//
// The rules are three regexps. They run on every line that has a progress word, so on printable-ASCII
// lines (every light-path line) the step rule is evaluated by a hand scan with the same semantics, and
// the planned rule only runs when its necessary shape "<digit> / <digit>" is on the line. The unit tests
// compare the scan with the regexp on generated lines.
#include <re2/re2.h>

#include <cerrno>
#include <climits>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "firstfault/extract.hpp"
#include "firstfault/text.hpp"

namespace ff::extract {

namespace {

const re2::RE2& step_re() {
  // The number is not one part of a dotted id ("STEP 8.0": Slurm's job.step id in slurmstepd's CANCELLED
  // line, https://slurm.schedmd.com/job_launch.html): a '.' and a digit may not follow it.
  static const re2::RE2 re(R"((?i)\b(?:step|iteration|iter|global_step)\s*[=:]?\s*(\d+)(?:$|[^\d.]|\.$|\.[^\d]))");
  return re;
}
const re2::RE2& planned_re() {
  static const re2::RE2 re(R"((?i)\b(?:step|iteration|iter|batch)\w*\s*\d+\s*/\s*(\d+))");
  return re;
}
const re2::RE2& batches_re() {
  static const re2::RE2 re(R"(\b(\d+) batches\b)");
  return re;
}

bool is_word(unsigned char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'; }  // RE2 \s
unsigned char lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? static_cast<unsigned char>(c | 0x20) : c; }

// RE2's integer argument parsing (re2.cc, parse into long): leading zeros do not count, and a value
// that does not fit makes the whole match fail.
std::optional<long> parse_long(std::string_view digits) {
  long v = 0;
  for (char c : digits) {
    int d = c - '0';
    if (v > (LONG_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

// Calls f(i) for each i, ascending, where s[i] in lower case is a, b, c or d (lower-case ASCII letters),
// until f returns true; returns whether it did. 16 bytes at a time with SSE2: this runs on every line, and
// most bytes are none of the letters. (c | 0x20 equals a letter exactly for that letter in either case.)
template <class F>
bool for_letters(std::string_view s, char a, char b, char c, char d, F&& f) {
  std::size_t i = 0;
#if defined(__SSE2__)
  const __m128i to_lower = _mm_set1_epi8(0x20), va = _mm_set1_epi8(a), vb = _mm_set1_epi8(b), vc = _mm_set1_epi8(c),
                vd = _mm_set1_epi8(d);
  for (; i + 16 <= s.size(); i += 16) {
    __m128i v = _mm_or_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i)), to_lower);
    __m128i eq = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, va), _mm_cmpeq_epi8(v, vb)),
                              _mm_or_si128(_mm_cmpeq_epi8(v, vc), _mm_cmpeq_epi8(v, vd)));
    for (auto m = static_cast<unsigned>(_mm_movemask_epi8(eq)); m != 0; m &= m - 1)
      if (f(i + static_cast<std::size_t>(__builtin_ctz(m)))) return true;
  }
#endif
  for (; i < s.size(); ++i) {
    char l = static_cast<char>(s[i] | 0x20);
    if ((l == a || l == b || l == c || l == d) && f(i)) return true;
  }
  return false;
}
template <class F>
bool for_letters(std::string_view s, char a, char b, char c, F&& f) {
  return for_letters(s, a, b, c, c, std::forward<F>(f));
}

// step_re() on a printable-ASCII body: the leftmost position where an alternative (in order) is followed
// by \s*[=:]?\s*\d+ not followed by '.' and a digit. The three parts after the word cannot overlap, so no backtracking is needed.
// Returns the digits' span (step_span): a number too large to parse is a match with no value (RE2 then
// returns false too).
step_span scan_step(std::string_view b) {
  static constexpr std::string_view alts[] = {"step", "iteration", "iter", "global_step"};
  const std::size_t n = b.size();
  step_span out;
  // only where an alternative can start: 's', 'i' or 'g' in either case, leftmost first
  for_letters(b, 's', 'i', 'g', [&](std::size_t pos) {
    if (pos > 0 && is_word(static_cast<unsigned char>(b[pos - 1]))) return false;  // \b (every word starts with \w)
    for (auto alt : alts) {
      if (pos + alt.size() > n) continue;
      std::size_t k = 0;
      while (k < alt.size() && lower(static_cast<unsigned char>(b[pos + k])) == static_cast<unsigned char>(alt[k])) ++k;
      if (k < alt.size()) continue;
      std::size_t j = pos + alt.size();
      while (j < n && is_space(static_cast<unsigned char>(b[j]))) ++j;
      if (j < n && (b[j] == '=' || b[j] == ':')) {
        ++j;
        while (j < n && is_space(static_cast<unsigned char>(b[j]))) ++j;
      }
      if (j >= n || !is_digit(static_cast<unsigned char>(b[j]))) continue;
      std::size_t e = j;
      while (e < n && is_digit(static_cast<unsigned char>(b[e]))) ++e;
      if (e + 1 < n && b[e] == '.' && is_digit(static_cast<unsigned char>(b[e + 1]))) continue;  // a dotted id
      out = {true, j, e - j};
      return true;
    }
    return false;
  });
  return out;
}

// The words read_progress() looks for, in one pass that stops only at an 's', 'i' or 'b' (either case):
// `step` is has_ci(s, "step") || has_ci(s, "iter"), `batch` has_ci(s, "batch"), `batches` " batches"
// (case-sensitive, as batches_re() is).
struct progress_words {
  bool step = false, batch = false, batches = false;
};
progress_words find_progress_words(std::string_view s) {
  progress_words w;
  auto at = [&](std::size_t i, std::string_view word) {
    if (i + word.size() > s.size()) return false;
    for (std::size_t k = 0; k < word.size(); ++k)
      if (lower(static_cast<unsigned char>(s[i + k])) != static_cast<unsigned char>(word[k])) return false;
    return true;
  };
  for_letters(s, 's', 'i', 'b', [&](std::size_t i) {
    switch (s[i] | 0x20) {
      case 's': w.step |= at(i, "step"); break;
      case 'i': w.step |= at(i, "iter"); break;
      default:
        if (at(i, "batch")) {
          w.batch = true;
          w.batches |= i > 0 && s[i - 1] == ' ' && s.substr(i, 7) == "batches";
        }
    }
    return w.step && w.batches;  // nothing more to learn
  });
  return w;
}

// The '/' at b[i] has a digit before it and after it (spaces between).
bool ratio_at(std::string_view b, std::size_t i) {
  std::size_t l = i;
  while (l > 0 && is_space(static_cast<unsigned char>(b[l - 1]))) --l;
  if (l == 0 || !is_digit(static_cast<unsigned char>(b[l - 1]))) return false;
  std::size_t r = i + 1;
  while (r < b.size() && is_space(static_cast<unsigned char>(b[r]))) ++r;
  return r < b.size() && is_digit(static_cast<unsigned char>(b[r]));
}

// A necessary condition for planned_re(): some '/' with a digit before it and after it (spaces between).
bool has_ratio_shape(std::string_view b) {
  for (std::size_t i = b.find('/'); i != std::string_view::npos; i = b.find('/', i + 1))
    if (ratio_at(b, i)) return true;
  return false;
}

std::optional<long> step_of(std::string_view body, bool plain) {
  long step = 0;
  if (plain || text::is_plain(body)) {
    const auto sp = scan_step(body);
    return sp.found ? parse_long(body.substr(sp.at, sp.len)) : std::nullopt;
  }
  if (re2::RE2::PartialMatch(re2::StringPiece(body.data(), body.size()), step_re(), &step)) return step;
  return std::nullopt;
}

std::optional<long> planned_of(std::string_view body, const progress_words& words) {
  re2::StringPiece bsp(body.data(), body.size());
  long planned = 0;
  if ((words.step || words.batch) && has_ratio_shape(body) &&
      re2::RE2::PartialMatch(bsp, planned_re(), &planned))
    return planned;
  if (words.batches && re2::RE2::PartialMatch(bsp, batches_re(), &planned)) return planned;
  return std::nullopt;
}
}  // namespace

progress read_progress(std::string_view body, bool plain) {
  progress out;
  const auto words = find_progress_words(body);
  if (words.step) out.step = step_of(body, plain);
  out.planned = planned_of(body, words);
  return out;
}

std::optional<long> read_step(std::string_view body, bool plain) {
  return find_progress_words(body).step ? step_of(body, plain) : std::nullopt;
}

step_span find_step(std::string_view ascii_body) {
  return find_progress_words(ascii_body).step ? scan_step(ascii_body) : step_span{};
}

std::optional<long> step_value(std::string_view digits) { return parse_long(digits); }

bool may_plan(std::string_view body) {
  // Both rules need a '/' between digits or " batches": most lines have neither, and are done after one
  // SSE pass instead of the word scan. ('/' | 0x20 is '/'; for_letters also stops at 'B' and 0x0F, which
  // are neither.)
  bool candidate = false;
  for_letters(body, '/', 'b', 'b', [&](std::size_t i) {
    if (body[i] == 'b') candidate = i > 0 && body[i - 1] == ' ' && body.substr(i, 7) == "batches";
    else if (body[i] == '/') candidate = ratio_at(body, i);
    return candidate;
  });
  if (!candidate) return false;
  // ... and planned_of() reads only after one of its words (a tqdm bar's "450/1000" alone plans nothing)
  const auto w = find_progress_words(body);
  return w.step || w.batch || w.batches;
}

std::optional<long> read_planned(std::string_view body) {
  if (!may_plan(body)) return std::nullopt;
  return planned_of(body, find_progress_words(body));
}

namespace detail {
// For the unit tests: the regexp's answer, with no shortcut.
progress read_progress_by_regex(std::string_view body) {
  progress out;
  re2::StringPiece bsp(body.data(), body.size());
  long v = 0;
  if (re2::RE2::PartialMatch(bsp, step_re(), &v)) out.step = v;
  if (re2::RE2::PartialMatch(bsp, planned_re(), &v)) out.planned = v;
  else if (re2::RE2::PartialMatch(bsp, batches_re(), &v)) out.planned = v;
  return out;
}
}  // namespace detail

}  // namespace ff::extract
