// The compiled prefix catalogue (prefix_catalog::impl), shared by the peel (prefix_catalog.cpp) and the
// shape memo of the fast path (shape_memo.cpp). Private to src/normalize.
#pragma once

#include <re2/re2.h>
#include <re2/set.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "firstfault/normalize.hpp"

namespace ff::normalize {

struct prefix_catalog::impl {
  struct compiled {
    std::unique_ptr<re2::RE2> re;
    int n_groups = 0;
    int g_rank = -1, g_local_rank = -1, g_host = -1, g_task = -1, g_ts = -1, g_level = -1;
    std::string ts_format;
    // No assertion that looks past the match (\b, $, ...): then the captures of a match depend only on
    // the matched bytes, and a memo keyed by them is exact (see normalize()).
    bool memo_ok = false;
  };
  std::vector<compiled> pats;
  std::unique_ptr<re2::RE2::Set> set;
  // Distinct for every catalogue ever loaded in this process (the per-thread memo is keyed by it: a new
  // catalogue at a freed one's address must not see its entries).
  std::uint64_t generation = 0;
  // Which patterns match a prefix of `text`; false when none.
  bool set_match(re2::StringPiece text, std::vector<int>& hits) const;
  std::uint64_t fingerprint = 0;  // FNV-1a over every prefix's name and regexp, in order
  bool lexer_ok = false;          // fingerprint == kLexerCatalogue
  bool digit_blind = false;       // every prefix regexp is detail::digit_blind (the shape memo's condition)
  std::vector<std::string> digit_words;  // literal words with digits in them ("c10d"): kept in shape keys
  std::vector<std::string> zeroed_digit_words;  // the same with their digits written '0' ("c00d")
};

namespace detail {
// A prefix's number group (rank, local rank, task): 1 to 9 ASCII digits, else none.
inline std::optional<int> to_int(std::string_view v) {
  if (v.empty() || v.size() > 9) return std::nullopt;
  int n = 0;
  for (char ch : v) {
    if (ch < '0' || ch > '9') return std::nullopt;
    n = n * 10 + (ch - '0');
  }
  return n;
}
}  // namespace detail

}  // namespace ff::normalize
