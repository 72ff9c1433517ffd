// What an unmatched line says about a run: failure-looking or not, and its template for grouping.
#include <re2/re2.h>

#include <cctype>

#include "firstfault/extract.hpp"
#include "firstfault/limits.hpp"
#include "firstfault/text.hpp"
#include "kb_data/tables.hpp"

namespace ff::extract {

namespace {
re2::StringPiece sp(std::string_view s) { return {s.data(), s.size()}; }
}  // namespace

std::string_view exception_type(std::string_view body) {
  // The type starts the body or follows a separator a prefix ends with (space, ':', ']', '>', '|').
  // It is followed by ": " or the end of the line, never by "(" (a raise statement or a repr).
  static const re2::RE2 re(
      R"((?:^|[\s:\]>|])(?:[A-Za-z_]\w*\.)*([A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure))(?::\s|:$|\s*$))");
  re2::StringPiece in = sp(body), type;
  if (body.size() > limits::kMaxExceptionLineBytes || !re2::RE2::PartialMatch(in, re, &type)) return {};
  return {type.data(), type.size()};
}

namespace {
// \b(?:STATE|...)\b over the rows of kb/_tables/job_states.tsv, each word quoted.
std::string job_states_pattern() {
  std::string alt;
  const auto& t = kb::detail::embedded_table("job_states");
  if (const int w = t.column("word"); w >= 0)
    for (const auto& r : t.rows) alt += (alt.empty() ? "" : "|") + re2::RE2::QuoteMeta(r[static_cast<std::size_t>(w)]);
  return R"(\b(?:)" + alt + R"()\b)";
}

// "(?i)" and the regexes of the rows of kb/_tables/error_words.tsv of `kind` (error, zero), in file order.
std::string error_words_pattern(std::string_view kind) {
  std::string alt;
  const auto& t = kb::detail::embedded_table("error_words");
  const int k = t.column("kind"), c = t.column("regex");
  if (k >= 0 && c >= 0)
    for (const auto& r : t.rows)
      if (r[static_cast<std::size_t>(k)] == kind) alt += (alt.empty() ? "" : "|") + r[static_cast<std::size_t>(c)];
  return alt.empty() ? std::string(R"([^\s\S])") : "(?i)" + alt;  // no row: a class that matches nothing
}
}  // namespace

suspicion classify_line(std::string_view body, char level) {
  if (body.size() > 8192) body = body.substr(0, 8192);
  // NCCL prints its errors at WARN level; a crash message is a failure at any level.
  static const re2::RE2 crash(kb::detail::regex_alternation(kb::detail::embedded_table("crash_messages")));  // kb/_tables/crash_messages.tsv
  if (re2::RE2::PartialMatch(sp(body), crash)) return suspicion::strong;
  if (level == 'F' || level == 'C') return suspicion::strong;
  // Warnings, by level or by the message's own category, do not page anyone.
  static const re2::RE2 warning(R"(^\s*(?:\[?(?:WARNING|WARN|Warning)\b|[\w.]*Warning:|\S+:\d+: \w*Warning:))");
  // A logger's level word among the first tokens ("train WARNING eval: ...", "W1201 ...") counts too.
  static const re2::RE2 warning_level(R"(^[\w.:\-\[\] ]{0,60}?\b(?:WARNING|WARN)\b)");
  // ... unless it says an operation did not happen (kb/_tables/failure_words.tsv: refused, timed out,
  // unreachable, cannot resolve, permission denied, no such file, killed): failure whatever the level tag.
  static const re2::RE2 failure_words(kb::detail::regex_alternation(kb::detail::embedded_table("failure_words")));
  if (level == 'W' || re2::RE2::PartialMatch(sp(body), warning) || re2::RE2::PartialMatch(sp(body), warning_level))
    return re2::RE2::PartialMatch(sp(body), failure_words) ? suspicion::weak : suspicion::none;
  if (!exception_type(body).empty()) return suspicion::strong;
  if (level == 'E') return suspicion::weak;
  // Error words and the zero counts that do not count: kb/_tables/error_words.tsv.
  static const re2::RE2 zero(error_words_pattern("zero"));
  static const re2::RE2 weak_words(error_words_pattern("error"));
  // Scheduler states as sacct/squeue print them, and Killed: kb/_tables/job_states.tsv.
  static const re2::RE2 weak_states(job_states_pattern());
  if (re2::RE2::PartialMatch(sp(body), weak_states)) return suspicion::weak;
  // Not at INFO level: a line the program logs as information ("retrying: connection refused") says it coped.
  if (level != 'I' && re2::RE2::PartialMatch(sp(body), failure_words)) return suspicion::weak;
  if (re2::RE2::PartialMatch(sp(body), weak_words)) {
    // A line whose only error words are zero counts ("0 errors", "failed: 0") is a summary, not a failure.
    std::string rest(body);
    re2::RE2::GlobalReplace(&rest, zero, "");
    if (re2::RE2::PartialMatch(rest, weak_words)) return suspicion::weak;
  }
  return suspicion::none;
}

namespace {
// RE2's \w and \b are ASCII: a byte of a multi-byte character is a non-word byte.
bool word_byte(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool digit_byte(char c) { return c >= '0' && c <= '9'; }
bool ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool hex_lower(char c) { return digit_byte(c) || (c >= 'a' && c <= 'f'); }
bool hex_any(char c) { return hex_lower(c) || (c >= 'A' && c <= 'F'); }
bool path_byte(char c) { return word_byte(c) || c == '.' || c == '+' || c == '-'; }

// The end of kTemplateVariable's match starting at `i` of `t` (leftmost-first: its alternatives in order,
// each with the length RE2 prefers), or 0 when none starts there. line_template() calls it left to right
// as GlobalReplace would; detail::line_template_by_regex is the regexp itself, and a test compares the two.
std::size_t variable_at(std::string_view t, std::size_t i) {
  const std::size_t n = t.size();
  auto at = [&](std::size_t k) { return k < n ? t[k] : '\0'; };
  auto boundary_after = [&](std::size_t e) { return e >= n || !word_byte(t[e]); };
  // (?:[A-Za-z]:)?(?:/[\w.+-]+){2,}/? : a drive letter if the path after it has two segments, else none.
  auto path_from = [&](std::size_t j) -> std::size_t {
    int segments = 0;
    while (at(j) == '/' && path_byte(at(j + 1))) {
      j += 2;
      while (path_byte(at(j))) ++j;
      ++segments;
    }
    if (segments < 2) return 0;
    return at(j) == '/' ? j + 1 : j;
  };
  if (ascii_letter(at(i)) && at(i + 1) == ':')
    if (std::size_t e = path_from(i + 2)) return e;
  if (std::size_t e = path_from(i)) return e;
  // The next three start with a word byte after a non-word one (\b).
  const bool starts_word = i == 0 || !word_byte(t[i - 1]);
  // \b0x[0-9A-Fa-f]+\b : the whole hex run, a word boundary after it (a shorter run ends before a word byte).
  if (starts_word && at(i) == '0' && at(i + 1) == 'x' && hex_any(at(i + 2))) {
    std::size_t e = i + 2;
    while (hex_any(at(e))) ++e;
    if (boundary_after(e)) return e;
  }
  // \b[0-9a-f]{8,}\b
  if (starts_word && hex_lower(at(i))) {
    std::size_t e = i;
    while (hex_lower(at(e))) ++e;
    if (e - i >= 8 && boundary_after(e)) return e;
  }
  // \b\d+(?:[.:,]\d+)*\b : as many groups as there are; when a word byte follows the last, one group fewer
  // (its end is followed by [.:,], a boundary).
  if (starts_word && digit_byte(at(i))) {
    std::size_t e = i, prev = 0;
    while (digit_byte(at(e))) ++e;
    while ((at(e) == '.' || at(e) == ':' || at(e) == ',') && digit_byte(at(e + 1))) {
      prev = e;
      e += 1;
      while (digit_byte(at(e))) ++e;
    }
    if (boundary_after(e)) return e;
    if (prev != 0) return prev;
  }
  // '[^']{0,200}' and "[^"]{0,200}" : the next quote, at most 200 characters (not bytes) on.
  if (at(i) == '\'' || at(i) == '"') {
    const char q = t[i];
    std::size_t chars = 0;
    for (std::size_t k = i + 1; k < n; ++k) {
      if (t[k] == q) return k + 1;
      if ((static_cast<unsigned char>(t[k]) & 0xC0) != 0x80 && ++chars > 200) break;
    }
  }
  return 0;
}

constexpr const char* kTemplateVariable =
    R"((?:[A-Za-z]:)?(?:/[\w.+-]+){2,}/?|\b0x[0-9A-Fa-f]+\b|\b[0-9a-f]{8,}\b|\b\d+(?:[.:,]\d+)*\b|'[^']{0,200}'|"[^"]{0,200}")";
}  // namespace

std::string line_template(std::string_view body) {
  // By hand: the regexp (kTemplateVariable) cost ~20M instructions on its first lines (its counted repeats
  // make a large program and many DFA states), a third of a small log's diagnosis.
  std::string_view t = text::prefix_utf8(text::trim(body), 400);
  std::string out;
  out.reserve(t.size());
  for (std::size_t i = 0; i < t.size();) {
    if (std::size_t e = variable_at(t, i)) {
      out += "<*>";
      i = e;
    } else {
      out += t[i++];
    }
  }
  return out;
}

namespace detail {
std::string line_template_by_regex(std::string_view body) {
  static const re2::RE2 var(kTemplateVariable);
  std::string t(text::prefix_utf8(text::trim(body), 400));
  re2::RE2::GlobalReplace(&t, var, "<*>");
  return t;
}
}  // namespace detail

}  // namespace ff::extract

namespace ff::extract {

std::vector<std::string> gate_patterns() {
  return {
      // record anchors of extractor::feed (its starts_with/contains tests, case as written there)
      R"(ChildFailedError:)", R"(The first process to do so was)", R"(srun: error:)", R"(CalledProcessError)",
      R"(failed \(exitcode: )", R"(Sending process \d+ closing signal SIG)", R"(\((?:most recent call first|idle|active|gil))",
      R"(Exception raised from )", R"(Traceback \(most recent call last\):)", R"(During handling of the above exception)",
      R"(The above exception was the direct cause)", R"(File "[^"]*", line \d+, in )",
      // classify_line: crash words, scheduler states, error words (a superset: case-insensitive)
      R"((?i)nccl warn|segmentation fault|core dumped|terminate called after throwing|aborted|bus error|panic|killed)",
      R"(SIG(?:SEGV|ABRT|BUS|KILL|ILL|FPE))", R"(CANCELLED|NODE_FAIL|OUT_OF_ME|TIMEOUT|PREEMPTED|BOOT_FAIL|DEADLINE)",
      R"((?i)error|exception|interrupt|exit|failure|failed|fatal|unhandled|timed out|non-zero)",
      // kb/_tables/failure_words.tsv: failure at any level tag ("killed" and "timed out" are above)
      R"((?i)refused|no route to host|unreachable|resolve|name or service not known|permission denied|no such file|command not found)",
      R"((?i)return(?:ed)?\s*(?:with\s*)?(?:code|status|value)?\s*[=:]?\s*-?[1-9])",
  };
}

}  // namespace ff::extract
