// The vocabulary tables of the knowledge base (kb/_tables/*.tsv) as the lower stages read them: the
// embedded text, parsed. The library (ff_kb) loads the same files for the signatures and for `kb lint`;
// this reader is for the stages below it (ingest, normalize, mask, extract), which must not depend on the
// library. Private to the layers (src/, ff_kb_data).
//
//   const auto& t = ff::kb::detail::embedded_table("host_words");
//   std::string alt = ff::kb::detail::words_where(t, "path");   // "node|worker|..." for a regexp
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ff::kb::detail {

struct tsv {
  std::vector<std::string> columns;             ///< the first line that is not a comment
  std::vector<std::vector<std::string>> rows;   ///< every later line with as many cells as columns, in file order
  /// The index of a column, or -1.
  int column(std::string_view name) const;
};

/// The embedded kb/_tables/<name>.tsv, parsed once ('#' lines and empty lines skipped). Empty when the
/// binary has no such table. Thread-safe.
const tsv& embedded_table(std::string_view name);

/// The `column` cell of the first row whose `key_column` cell is `key`, or empty (no such row or column).
std::string cell_where(const tsv& t, std::string_view key_column, std::string_view key, std::string_view column);

/// The `word` cells of the rows whose column `flag` is "yes", in file order, joined by '|' (the words are
/// plain lower-case letters and digits: they need no escaping in a regexp).
std::string words_where(const tsv& t, std::string_view flag);

/// The `column` cells of every row (RE2 patterns, one per row), in file order, each wrapped in (?:...) and
/// joined by '|': one alternation for the whole table. Empty when the table has no such column or no rows.
///   RE2 re(regex_alternation(embedded_table("launch_banners")));
std::string regex_alternation(const tsv& t, std::string_view column = "regex");

}  // namespace ff::kb::detail
