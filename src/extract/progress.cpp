// Progress facts from a line body (extract.hpp): the step a rank reached and the steps it planned.
//
// The rules are three regexps made from the words of kb/_tables/progress_words.tsv. They run on every line
// that has a progress word, so on printable-ASCII lines (every light-path line) the step rule is evaluated
// by a hand scan with the same semantics, and the planned rule only runs when its necessary shape
// "<digit> / <digit>" is on the line. The unit tests compare the scan with the regexp on generated lines.
#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <string>
#include <vector>

#include "firstfault/extract.hpp"
#include "firstfault/text.hpp"
#include "kb_data/tables.hpp"

namespace ff::extract {

namespace {

// The words of kb/_tables/progress_words.tsv by what they read (column reads), in file order, and what the
// hand scans derive from them.
struct vocabulary {
  std::vector<std::string> step, planned, count;
  // the step (planned) words that hold no other step (planned) word: a line holds a step (planned) word,
  // in any case, exactly when it holds one of these
  std::vector<std::string> step_cover, planned_cover;
  // what find_progress_words() looks for at a byte (lower-cased): the cover words and count words that
  // start with it
  struct entry {
    std::string word;
    bool step = false, planned = false, count = false;
  };
  std::array<std::vector<entry>, 256> at_letter;
  char step_letters[4] = {0, 0, 0, 0};  // the step words' first letters (lower case), repeated to fill
  char word_letters[4] = {0, 0, 0, 0};  // the covers' and count words' first letters (lower case)
  char count_letters[3] = {0, 0, 0};    // '/' and the count words' first letters
  bool hand = true;                     // every letter set fits its scan (else the regexps decide)
};

// Fills `out` with the distinct values of `letters` repeated to its size; false when they do not fit.
template <std::size_t N>
bool letter_set(const std::vector<char>& letters, char (&out)[N]) {
  std::vector<char> d;
  for (char c : letters)
    if (std::find(d.begin(), d.end(), c) == d.end()) d.push_back(c);
  if (d.empty() || d.size() > N) return false;
  for (std::size_t i = 0; i < N; ++i) out[i] = d[std::min(i, d.size() - 1)];
  return true;
}

std::vector<std::string> cover_of(const std::vector<std::string>& words) {
  std::vector<std::string> out;
  for (const auto& w : words)
    if (std::none_of(words.begin(), words.end(), [&](const std::string& o) { return o != w && w.find(o) != std::string::npos; }))
      out.push_back(w);
  return out;
}

const vocabulary& words() {
  static const vocabulary v = [] {
    vocabulary out;
    const auto& t = kb::detail::embedded_table("progress_words");
    const int w = t.column("word"), r = t.column("reads");
    for (std::size_t i = 0; w >= 0 && r >= 0 && i < t.rows.size(); ++i) {
      const auto& row = t.rows[i];
      const std::string& word = row[static_cast<std::size_t>(w)];
      const std::string reads = " " + row[static_cast<std::size_t>(r)] + " ";
      if (reads.find(" step ") != std::string::npos) out.step.push_back(word);
      if (reads.find(" planned ") != std::string::npos) out.planned.push_back(word);
      if (reads.find(" count ") != std::string::npos) out.count.push_back(word);
    }
    out.step_cover = cover_of(out.step);
    out.planned_cover = cover_of(out.planned);
    auto in = [](const std::vector<std::string>& list, const std::string& x) { return std::find(list.begin(), list.end(), x) != list.end(); };
    for (const auto* list : {&out.step_cover, &out.planned_cover})
      for (const auto& x : *list) {
        auto& slot = out.at_letter[static_cast<unsigned char>(x.empty() ? 0 : x[0] | 0x20)];
        if (std::none_of(slot.begin(), slot.end(), [&](const vocabulary::entry& e) { return !e.count && e.word == x; }))
          slot.push_back({x, in(out.step_cover, x), in(out.planned_cover, x), false});
      }
    for (const auto& x : out.count) out.at_letter[static_cast<unsigned char>(x.empty() ? 0 : x[0] | 0x20)].push_back({x, false, false, true});
    std::vector<char> step_first, word_first, count_first = {'/'};
    for (const auto& x : out.step) step_first.push_back(x.empty() ? '\0' : x[0]);
    for (const auto* list : {&out.step_cover, &out.planned_cover, &out.count})
      for (const auto& x : *list) word_first.push_back(x.empty() ? '\0' : static_cast<char>(x[0] | 0x20));
    for (const auto& x : out.count) count_first.push_back(x.empty() ? '\0' : x[0]);
    // a lower-case letter, then lower-case letters, digits and '_' (what the scans' case folding, c | 0x20,
    // and their first-letter sets assume)
    auto ok_word = [](const std::string& x) {
      return !x.empty() && x[0] >= 'a' && x[0] <= 'z' &&
             std::all_of(x.begin(), x.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
    };
    out.hand = letter_set(step_first, out.step_letters) && letter_set(word_first, out.word_letters) &&
               letter_set(count_first, out.count_letters);
    for (const auto* list : {&out.step, &out.planned, &out.count})
      out.hand = out.hand && std::all_of(list->begin(), list->end(), ok_word);
    return out;
  }();
  return v;
}

// The words of a list, quoted, as an alternation ("(?:a|b)"; a list with no word matches nothing).
std::string alternation(const std::vector<std::string>& list) {
  std::string alt;
  for (const auto& x : list) alt += (alt.empty() ? "" : "|") + re2::RE2::QuoteMeta(x);
  return alt.empty() ? std::string(R"([^\s\S])") : "(?:" + alt + ")";
}

const re2::RE2& step_re() {
  // The number is not one part of a dotted id ("STEP 8.0": Slurm's job.step id in slurmstepd's CANCELLED
  // line, https://slurm.schedmd.com/job_launch.html): a '.' and a digit may not follow it.
  static const re2::RE2 re(R"((?i)\b)" + alternation(words().step) + R"(\s*[=:]?\s*(\d+)(?:$|[^\d.]|\.$|\.[^\d]))");
  return re;
}
const re2::RE2& planned_re() {
  static const re2::RE2 re(R"((?i)\b)" + alternation(words().planned) + R"(\w*\s*\d+\s*/\s*(\d+))");
  return re;
}
const re2::RE2& batches_re() {
  static const re2::RE2 re(R"(\b(\d+) )" + alternation(words().count) + R"(\b)");
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
  const auto& v = words();
  const std::size_t n = b.size();
  step_span out;
  if (!v.hand) {  // a table the scan does not fit: the regexp's span
    re2::StringPiece digits;
    if (re2::RE2::PartialMatch(re2::StringPiece(b.data(), b.size()), step_re(), &digits))
      out = {true, static_cast<std::size_t>(digits.data() - b.data()), digits.size()};
    return out;
  }
  // only where an alternative can start: a step word's first letter in either case, leftmost first
  const char* l = v.step_letters;
  for_letters(b, l[0], l[1], l[2], l[3], [&](std::size_t pos) {
    if (pos > 0 && is_word(static_cast<unsigned char>(b[pos - 1]))) return false;  // \b (every word starts with \w)
    for (std::string_view alt : v.step) {
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

// The words read_progress() looks for, in one pass that stops only at their first letters (either case):
// `step`: a step word in any case ("step" or "iter" today: every step word holds one), `batch`: a planned
// word in any case, `batches`: " " and a count word (case-sensitive, as batches_re() is).
struct progress_words {
  bool step = false, batch = false, batches = false;
};
progress_words find_progress_words(std::string_view s) {
  const auto& v = words();
  progress_words w;
  auto at = [&](std::size_t i, std::string_view word) {
    if (i + word.size() > s.size()) return false;
    for (std::size_t k = 0; k < word.size(); ++k)
      if (lower(static_cast<unsigned char>(s[i + k])) != static_cast<unsigned char>(word[k])) return false;
    return true;
  };
  auto visit = [&](std::size_t i) {
    for (const auto& e : v.at_letter[static_cast<unsigned char>(s[i] | 0x20)]) {
      if (e.count) {
        w.batches = w.batches || (i > 0 && s[i - 1] == ' ' && s.substr(i, e.word.size()) == e.word);
      } else if (at(i, e.word)) {
        w.step = w.step || e.step;
        w.batch = w.batch || e.planned;
      }
    }
    return w.step && w.batch && w.batches;  // nothing more to learn
  };
  if (v.hand) {
    const char* l = v.word_letters;
    for_letters(s, l[0], l[1], l[2], l[3], visit);
  } else {
    for (std::size_t i = 0; i < s.size() && !visit(i); ++i) {
    }
  }
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
  if (words().hand && (plain || text::is_plain(body))) {
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
  // Both rules need a '/' between digits or " " and a count word (" batches"): most lines have neither, and
  // are done after one SSE pass instead of the word scan. ('/' | 0x20 is '/'; for_letters also stops at the
  // other case of a count word's first letter, and at 0x0F, which the exact compare refuses.)
  const auto& v = words();
  bool candidate = false;
  auto visit = [&](std::size_t i) {
    if (body[i] == '/') candidate = ratio_at(body, i);
    else
      candidate = i > 0 && body[i - 1] == ' ' &&
                  std::any_of(v.count.begin(), v.count.end(), [&](const std::string& x) { return body.substr(i, x.size()) == x; });
    return candidate;
  };
  if (v.hand) {
    const char* l = v.count_letters;
    for_letters(body, l[0], l[1], l[2], visit);
  } else {
    for (std::size_t i = 0; i < body.size() && !visit(i); ++i) {
    }
  }
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
