#include "firstfault/text.hpp"

#include <algorithm>
#include <cstdio>

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

bool is_plain(std::string_view s) {
  for (unsigned char c : s)
    if ((c < 0x20 && c != '\t') || c >= 0x7F) return false;
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
      unsigned cp = 0;
      if (n == 2 && c == 0xD8 && c1 == 0x9C) cp = 0x061C;  // ARABIC LETTER MARK
      if (n == 3 && c == 0xE2 && c1 == 0x80 && (c2 == 0x8E || c2 == 0x8F || (c2 >= 0xAA && c2 <= 0xAE))) cp = 0x2000 + (c2 - 0x80);
      if (n == 3 && c == 0xE2 && c1 == 0x81 && c2 >= 0xA6 && c2 <= 0xA9) cp = 0x2040 + (c2 - 0x80);
      if (cp) {
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

}  // namespace ff::text
