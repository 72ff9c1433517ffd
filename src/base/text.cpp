#include "firstfault/text.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ff::text {

namespace {
// Length of a valid UTF-8 sequence starting at s[i], or 0 when invalid.
std::size_t utf8_len(std::string_view s, std::size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  std::size_t n;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) n = 3;
  else if (c >= 0xF0 && c <= 0xF4) n = 4;
  else return 0;
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return 0;
  }
  auto c1 = static_cast<unsigned char>(s[i + 1]);
  if (c == 0xE0 && c1 < 0xA0) return 0;  // overlong
  if (c == 0xED && c1 > 0x9F) return 0;  // surrogates
  if (c == 0xF0 && c1 < 0x90) return 0;  // overlong
  if (c == 0xF4 && c1 > 0x8F) return 0;  // > U+10FFFF
  // C1 controls (U+0080..U+009F) are terminal controls too.
  if (c == 0xC2 && c1 < 0xA0) return 0;
  return n;
}
}  // namespace

namespace {
// Printable ASCII or a tab: what is_plain() allows.
bool plain_byte(unsigned char c) { return (c >= 0x20 && c < 0x7F) || c == '\t'; }
#if defined(__SSE2__)
// The bytes of v that plain_byte() refuses, as a mask (a signed compare with 0x20 catches the controls and
// every byte >= 0x80 at once).
__m128i unplain_bytes(__m128i v) {
  return _mm_or_si128(_mm_andnot_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\t')), _mm_cmplt_epi8(v, _mm_set1_epi8(0x20))),
                      _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7F)));
}
#endif

// The index of the first byte that is not printable ASCII or a tab, or npos.
// Sixteen bytes at a time with SSE2 (a signed compare
// with 0x20 catches the controls and every byte >= 0x80 at once); eight at a time without it, a word with
// a byte < 0x20 (a tab, a newline or a control character) checked byte by byte.
std::size_t first_unplain(std::string_view s) {
  std::size_t i = 0;
#if defined(__SSE2__)
  for (; i + 16 <= s.size(); i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i));
    if (const int m = _mm_movemask_epi8(unplain_bytes(v)); m != 0) return i + static_cast<std::size_t>(__builtin_ctz(static_cast<unsigned>(m)));
  }
#else
  constexpr std::uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    const std::uint64_t d = w ^ (0x7F * ones);
    if (!(w & highs) && !((d - ones) & ~d & highs) && ((w - 0x20 * ones) & ~w & highs) == 0) continue;
    for (std::size_t k = i; k < i + 8; ++k)
      if (!plain_byte(static_cast<unsigned char>(s[k]))) return k;
  }
#endif
  for (; i < s.size(); ++i)
    if (!plain_byte(static_cast<unsigned char>(s[i]))) return i;
  return std::string_view::npos;
}
}  // namespace

bool is_plain(std::string_view s) { return first_unplain(s) == std::string_view::npos; }

std::size_t find_line_end(std::string_view s) {
  std::size_t i = 0;
#if defined(__SSE2__)
  const __m128i nl = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r'), nul = _mm_setzero_si128();
  for (; i + 16 <= s.size(); i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i));
    const int m = _mm_movemask_epi8(
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, nl), _mm_cmpeq_epi8(v, cr)), _mm_cmpeq_epi8(v, nul)));
    if (m != 0) return i + static_cast<std::size_t>(__builtin_ctz(static_cast<unsigned>(m)));
  }
#endif
  for (; i < s.size(); ++i)
    if (s[i] == '\n' || s[i] == '\r' || s[i] == '\0') return i;
  return std::string_view::npos;
}

std::size_t find_line_end(std::string_view s, bool& plain) {
  plain = true;
  std::size_t i = 0;
#if defined(__SSE2__)
  // first_unplain()'s test, whose bytes include the three line ends: while it finds nothing the line
  // is plain so far, and on a hit one more mask says whether a line end is the first such byte.
  const __m128i nl = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r'), nul = _mm_setzero_si128();
  for (; i + 16 <= s.size(); i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i));
    const int m = _mm_movemask_epi8(unplain_bytes(v));
    if (m == 0) continue;
    const int ends = _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, nl), _mm_cmpeq_epi8(v, cr)), _mm_cmpeq_epi8(v, nul)));
    if (ends != 0) {
      const auto e = static_cast<unsigned>(__builtin_ctz(static_cast<unsigned>(ends)));
      plain = static_cast<unsigned>(__builtin_ctz(static_cast<unsigned>(m))) == e;
      return i + e;
    }
    plain = false;
    const std::size_t e = find_line_end(s.substr(i + 16));
    return e == std::string_view::npos ? e : i + 16 + e;
  }
#endif
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\n' || c == '\r' || c == '\0') return i;
    plain = plain && plain_byte(static_cast<unsigned char>(c));
  }
  return std::string_view::npos;
}

namespace {
// The bidirectional controls sanitize() shows escaped (ALM U+061C, LRM/RLM U+200E/F, U+202A-U+202E,
// U+2066-U+2069), given the first bytes of an n-byte UTF-8 sequence.
bool is_bidi(unsigned char c, unsigned char c1, unsigned char c2, std::size_t n) {
  if (n == 2) return c == 0xD8 && c1 == 0x9C;
  if (n != 3 || c != 0xE2) return false;
  if (c1 == 0x80) return c2 == 0x8E || c2 == 0x8F || (c2 >= 0xAA && c2 <= 0xAE);
  return c1 == 0x81 && c2 >= 0xA6 && c2 <= 0xA9;
}
}  // namespace

bool is_clean(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    // Printable ASCII and tabs by the SSE2 pass, up to the next byte that is not (a tqdm bar's line is
    // kilobytes of ASCII with a few block characters: byte by byte it cost ~16 instructions a byte).
    const std::size_t k = first_unplain(s.substr(i));
    if (k == std::string_view::npos) return true;
    i += k;
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t') || c == 0x7F) return false;  // ESC and every other control is removed
      ++i;
      continue;
    }
    std::size_t n = utf8_len(s, i);
    if (n == 0) return false;  // replaced by U+FFFD
    if (is_bidi(c, static_cast<unsigned char>(s[i + 1]), n == 3 ? static_cast<unsigned char>(s[i + 2]) : 0, n)) return false;
    i += n;
  }
  return true;
}

std::string sanitize(std::string_view s, std::size_t* invalid) {
  // Fast path: printable ASCII and tabs only (most log lines) need no work.
  if (is_plain(s)) {
    if (invalid) *invalid = 0;
    return std::string(s);
  }
  std::string out;
  out.reserve(s.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c == 0x1B) {  // ESC: skip the whole sequence
      std::size_t j = i + 1;
      if (j < s.size() && s[j] == '[') {  // CSI: parameters then a final byte 0x40-0x7E
        ++j;
        while (j < s.size() && !(s[j] >= 0x40 && s[j] <= 0x7E)) ++j;
        i = std::min(s.size(), j + 1);
      } else if (j < s.size() && (s[j] == ']' || s[j] == 'P' || s[j] == '_' || s[j] == '^')) {
        // OSC/DCS/APC/PM: until BEL or ST (ESC \)
        ++j;
        while (j < s.size() && s[j] != '\x07' && !(s[j] == 0x1B && j + 1 < s.size() && s[j + 1] == '\\')) ++j;
        i = std::min(s.size(), j + (j < s.size() && s[j] == 0x1B ? 2 : 1));
      } else {
        i = std::min(s.size(), j + 1);
      }
      continue;
    }
    if (c < 0x20 && c != '\t') { ++i; continue; }
    if (c == 0x7F) { ++i; continue; }
    std::size_t n = utf8_len(s, i);
    if (n >= 2) {  // Unicode bidirectional controls reorder what the reader sees: shown escaped, never applied
      auto c1 = static_cast<unsigned char>(s[i + 1]);
      auto c2 = n == 3 ? static_cast<unsigned char>(s[i + 2]) : 0;
      if (is_bidi(c, c1, c2, n)) {
        unsigned cp = n == 2 ? 0x061C : (c1 == 0x80 ? 0x2000 : 0x2040) + (c2 - 0x80u);
        char buf[16];
        std::snprintf(buf, sizeof buf, "<U+%04X>", cp);
        out += buf;
        i += n;
        continue;
      }
    }
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++bad;
      ++i;
      continue;
    }
    out.append(s.substr(i, n));
    i += n;
  }
  if (invalid) *invalid = bad;
  return out;
}

std::string_view prefix_utf8(std::string_view s, std::size_t n) {
  if (s.size() <= n) return s;
  std::size_t cut = n;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // s[cut] is a continuation byte
  return s.substr(0, cut);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string html_escape(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string rank_ranges(std::vector<int> r) {
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  std::string out;
  for (std::size_t i = 0; i < r.size();) {
    std::size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(r[i]);
    if (j > i) out += '-' + std::to_string(r[j]);
    i = j + 1;
  }
  return out;
}

namespace {

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '\''; }

// The word that ends right before position `end` (spaces skipped), and where it starts.
std::string_view word_before(std::string_view s, std::size_t end, std::size_t* start) {
  while (end > 0 && s[end - 1] == ' ') --end;
  std::size_t b = end;
  while (b > 0 && is_word_char(s[b - 1])) --b;
  *start = b;
  return s.substr(b, end - b);
}

std::string lower(std::string_view w) {
  std::string l(w);
  for (auto& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return l;
}

}  // namespace

std::string with_fallbacks(std::string_view tpl) {
  std::string out;
  for (std::size_t i = 0; i < tpl.size(); ++i) {
    if (tpl[i] == '{')
      if (auto end = placeholder_end(tpl, i); end != std::string_view::npos) {
        auto spec = tpl.substr(i + 1, end - i - 1);
        if (auto bar = spec.find('|'); bar != std::string_view::npos) {
          out += spec.substr(bar + 1);
          i = end;
          continue;
        }
      }
    out += tpl[i];
  }
  return out;
}
std::vector<std::string> with_fallbacks(const std::vector<std::string>& tpls) {
  std::vector<std::string> out;
  out.reserve(tpls.size());
  for (const auto& t : tpls) out.push_back(with_fallbacks(t));
  return out;
}

std::string fill_sentence(std::string_view tpl, const std::function<std::string(const std::string&)>& lookup) {
  static const std::set<std::string> prepositions = {"on", "from", "at", "for", "within", "in", "to", "with", "of",
                                                      "after", "by", "via", "near", "into"};
  // Nouns that name the value after them, with the words that stand in for "<noun> <value>".
  static const std::map<std::string, std::string> nouns = {
      {"rank", "a rank"}, {"ranks", "some ranks"}, {"cpu", "a CPU"}, {"task", "a task"}, {"gpu", "a GPU"}, {"gpus", "some GPUs"}, {"nvswitch", "an NVSwitch"},
      {"process", "a process"}, {"worker", "a worker"}, {"peer", "a peer"}, {"link", "a link"}, {"job", "the job"},
      {"work", "a collective"}, {"node", "a node"}, {"host", "a host"}, {"xid", "an Xid"}, {"device", "a device"},
      {"step", "a step"}, {"iteration", "an iteration"}, {"shard", "a shard"}, {"file", "a file"}, {"port", "a port"},
      {"interface", "an interface"}, {"nic", "a NIC"}, {"hca", "an HCA"}, {"pod", "a pod"},
      {"code", "a non-zero code"}, {"status", "a non-zero status"}, {"signal", "a signal"}};
  static const std::map<std::string, std::string> phrases = {
      {"exc", "an exception"}, {"op", "a collective"}, {"metric", "a metric"}, {"signal", "a signal"},
      {"status", "a non-zero status"}, {"exit_code", "a non-zero code"}, {"exitcode", "a non-zero code"}};
  std::string out;
  for (std::size_t i = 0; i < tpl.size(); ++i) {
    if (tpl[i] != '{') {
      out += tpl[i];
      continue;
    }
    auto end = tpl.find('}', i);
    if (end == std::string_view::npos) {
      out += tpl.substr(i);
      break;
    }
    std::string name(tpl.substr(i + 1, end - i - 1));
    std::string v = lookup(name);
    if (!v.empty()) {
      out += v;
      i = end;
      continue;
    }
    // inside a parenthesis: drop it (the text of it written so far, and the rest of it in the template)
    auto open = out.rfind('(');
    if (open != std::string::npos && out.find(')', open) == std::string::npos) {
      auto close = tpl.find(')', end);
      if (close != std::string_view::npos) {
        out.erase(open);
        while (!out.empty() && out.back() == ' ') out.pop_back();
        i = close;
        continue;
      }
    }
    // a unit right after the value goes with it ("{seconds} s", "{n}-byte", "{s}s")
    auto skip_unit = [&](std::size_t after) {
      static const char* units[] = {" seconds", " bytes", " MiB", " GiB", " KiB", " ms", " MB", " GB", " s", "-byte", "ms", "s", "%"};
      for (const char* u : units) {
        std::string_view uv(u);
        if (tpl.substr(after + 1, uv.size()) == uv &&
            (after + 1 + uv.size() >= tpl.size() || !std::isalnum(static_cast<unsigned char>(tpl[after + 1 + uv.size()]))))
          return after + uv.size();
      }
      return after;
    };
    auto drop_word = [&](std::size_t from) {
      out.erase(from);
      while (!out.empty() && out.back() == ' ') out.pop_back();
    };
    // an operator glued to the value ("accelerate>={version}"): it goes too
    while (!out.empty() && std::string_view("<>=!~").find(out.back()) != std::string_view::npos) out.pop_back();
    std::size_t wstart = 0;
    std::string w = lower(word_before(out, out.size(), &wstart));
    if (prepositions.count(w) || w == "than" || w == "and" || w == "or") {
      drop_word(wstart);
      // "for more than {n} s" and "allocating {bytes}": the words that only lead to the value go too
      for (int k = 0; k < 2; ++k) {
        std::string w2 = lower(word_before(out, out.size(), &wstart));
        if (w2 == "more" || w2 == "less" || w2 == "longer" || (k == 1 && prepositions.count(w2))) drop_word(wstart);
      }
      i = skip_unit(end);
      continue;
    }
    if (w.size() > 4 && w.compare(w.size() - 3, 3, "ing") == 0) {  // "allocating {bytes}", "while running {task}"
      drop_word(wstart);
      std::string w2 = lower(word_before(out, out.size(), &wstart));
      if (w2 == "while" || w2 == "when" || prepositions.count(w2)) drop_word(wstart);
      i = skip_unit(end);
      continue;
    }
    if (auto it = nouns.find(w); it != nouns.end()) {
      bool capital = std::isupper(static_cast<unsigned char>(out[wstart])) && (wstart == 0 || out[wstart - 1] == '\'' ||
                                                                              out.find_last_not_of(' ', wstart - 1) == std::string::npos ||
                                                                              std::string_view(".:!?").find(out[out.find_last_not_of(' ', wstart - 1)]) != std::string_view::npos);
      out.erase(wstart);
      std::string rep = it->second;
      if (capital) rep[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(rep[0])));
      out += rep;
      i = end;
      continue;
    }
    if (auto it = phrases.find(name); it != phrases.end()) out += it->second;
    i = skip_unit(end);
  }
  // tidy: no double spaces, no space before punctuation, no empty parentheses
  std::string t;
  for (std::size_t i = 0; i < out.size(); ++i) {
    char c = out[i];
    if (c == ' ' && (t.empty() || t.back() == ' ')) continue;
    if ((c == '.' || c == ',' || c == ':' || c == ';' || c == ')') && !t.empty() && t.back() == ' ') t.pop_back();
    if (c == ',' && !t.empty() && (t.back() == ',' || t.back() == '(')) continue;
    t += c;
  }
  for (std::string_view e : {"()", "( )"})
    for (auto p = t.find(e); p != std::string::npos; p = t.find(e)) t.erase(p, e.size());
  while (!t.empty() && t.back() == ' ') t.pop_back();
  return t;
}

std::string name_key(std::string_view name) {
  std::string k;
  for (unsigned char c : name)
    if (std::isalnum(c)) k += static_cast<char>(std::tolower(c));
  return k;
}

std::vector<std::string> closest(std::string_view typed, const std::vector<std::string>& candidates, std::size_t max) {
  const std::string t = name_key(typed);
  if (t.empty()) return {};
  auto distance = [](const std::string& a, const std::string& b) {  // Levenshtein, two rows
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      cur[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      std::swap(prev, cur);
    }
    return prev[b.size()];
  };
  const std::size_t limit = std::max<std::size_t>(2, t.size() / 3);
  std::vector<std::pair<std::size_t, std::string>> ranked;  // (score, candidate): lower is closer
  for (const auto& c : candidates) {
    std::string k = name_key(c);
    std::size_t score;
    if (k == t) score = 0;
    else if (k.rfind(t, 0) == 0) score = 1 + (k.size() - t.size()) / 64;
    else if (k.find(t) != std::string::npos) score = 2;
    else if (std::size_t d = distance(t, k.substr(0, std::min(k.size(), t.size() + limit))); d <= limit) score = 3 + d;
    else continue;
    ranked.emplace_back(score, c);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (const auto& [_, c] : ranked) {
    if (out.size() >= max) break;
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

}  // namespace ff::text
