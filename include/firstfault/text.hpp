// firstfault/text.hpp: small text helpers shared by every stage.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ff::text {

/// Makes untrusted log bytes safe to store and print: removes ANSI/VT escape sequences (CSI, OSC and
/// two-byte ESC forms) and other C0/C1 control characters except tab, and replaces bytes that are not
/// valid UTF-8 with U+FFFD. Returns the number of invalid UTF-8 sequences replaced in *invalid.
std::string sanitize(std::string_view raw, std::size_t* invalid = nullptr);
/// &, <, >, " and ' as HTML entities (text and attribute values alike).
std::string html_escape(std::string_view s);
/// True when `raw` is printable ASCII and tabs only (then sanitize() returns it unchanged).
bool is_plain(std::string_view raw);
/// Index of the first '\n', '\r' or NUL byte of `s` (one pass), or npos.
std::size_t find_line_end(std::string_view s);
/// find_line_end(), and in `plain` whether the bytes before the end (all of `s` when npos) are printable
/// ASCII and tabs only (is_plain() of the line): the line reader's one pass answers both.
std::size_t find_line_end(std::string_view s, bool& plain);
/// True exactly when sanitize() would return `raw` unchanged: is_plain(), or valid UTF-8 without ESC, other
/// C0/C1 controls, DEL or bidirectional controls (a tqdm bar's block characters, accented names).
bool is_clean(std::string_view raw);

/// The first at most n bytes of s, cut back to a UTF-8 character boundary (never splits a character).
std::string_view prefix_utf8(std::string_view s, std::size_t n);

/// Trims ASCII whitespace from both ends.
std::string_view trim(std::string_view s);
inline std::string trim_copy(const std::string& s) { return std::string(trim(s)); }

/// "0-2,4-7" from a sorted set of ranks.
std::string rank_ranges(std::vector<int> ranks);

/// Where the placeholder that opens at tpl[i] ends (its '}'), or npos when the brace there is not one: a
/// placeholder is `{name}` or `{name|fallback}` with a name of letters, digits, '_' and '.' that starts with a
/// letter or '_'. Other braces are the command's own and stay as written: awk's `{print $1}`, a jsonpath
/// `{.status.reason}`, docker's `{{.HostConfig.ShmSize}}`, the shell's `${VAR}`.
inline std::size_t placeholder_end(std::string_view tpl, std::size_t i) {
  constexpr auto npos = std::string_view::npos;
  if (i >= tpl.size() || tpl[i] != '{' || (i > 0 && tpl[i - 1] == '$')) return npos;
  auto word = [](char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && ((c >= '0' && c <= '9') || c == '.'));
  };
  std::size_t j = i + 1;
  if (j >= tpl.size() || !word(tpl[j], true)) return npos;
  while (j < tpl.size() && word(tpl[j], false)) ++j;
  if (j < tpl.size() && tpl[j] == '}') return j;
  if (j < tpl.size() && tpl[j] == '|') return tpl.find('}', j);
  return npos;
}

/// Replaces {name} and {name|fallback} placeholders (placeholder_end) with lookup(spec), spec being the text
/// between the braces; every other brace is kept.
template <class F>
std::string fill_template(std::string_view tpl, F&& lookup) {
  std::string out;
  for (std::size_t i = 0; i < tpl.size(); ++i) {
    if (auto end = placeholder_end(tpl, i); end != std::string_view::npos) {
      out += lookup(std::string(tpl.substr(i + 1, end - i - 1)));
      i = end;
      continue;
    }
    out += tpl[i];
  }
  return out;
}

/// A step template as the knowledge base documents it, outside any run: each `{name|fallback}` shows its
/// fallback ("torchrun --nproc_per_node {nproc|2} {script|train.py}" -> "... 2 train.py"); other text stays.
std::string with_fallbacks(std::string_view tpl);
std::vector<std::string> with_fallbacks(const std::vector<std::string>& tpls);

/// Fills a prose template (a root-cause sentence) where some placeholders may have no value in this run.
/// A placeholder whose value is empty is not shown as "(unknown)": the words that only carry it go with it.
///  - inside a parenthesis: the parenthesis goes ("exited (pid {pid})" -> "exited");
///  - after a preposition: both go ("failed on {host}." -> "failed.");
///  - after a noun naming it: an article takes its place ("Rank {rank} ran out" -> "A rank ran out",
///    "Ranks {ranks} timed out" -> "Some ranks timed out");
///  - else a phrase for the field (exc -> "an exception", op -> "a collective"), or the placeholder goes.
/// `lookup` returns "" for a value the run does not have. Spacing and punctuation are tidied after.
std::string fill_sentence(std::string_view tpl, const std::function<std::string(const std::string&)>& lookup);

/// A name as a user may type it: lower case, letters and digits only ("CUDA-OOM", "cuda_oom" -> "cudaoom").
std::string name_key(std::string_view name);
/// The candidates closest to what the user typed, best first, for "did you mean": the same name_key first,
/// then candidates whose key starts with (or contains) the typed key, then by edit distance (at most a
/// third of the typed length, and at least 2). At most `max`; empty when nothing is close.
std::vector<std::string> closest(std::string_view typed, const std::vector<std::string>& candidates, std::size_t max = 3);

}  // namespace ff::text
