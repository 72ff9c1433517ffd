// The vocabulary tables read from the embedded knowledge base (tables.hpp).
#include "tables.hpp"

#include <map>
#include <mutex>
#include <string>

#include "kb/embedded.hpp"

namespace ff::kb::detail {

int tsv::column(std::string_view name) const {
  for (std::size_t i = 0; i < columns.size(); ++i)
    if (columns[i] == name) return static_cast<int>(i);
  return -1;
}

namespace {
tsv parse(std::string_view text) {
  tsv t;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cells;
    for (std::size_t from = 0;;) {
      const auto tab = line.find('\t', from);
      cells.emplace_back(line.substr(from, tab == std::string_view::npos ? std::string_view::npos : tab - from));
      if (tab == std::string_view::npos) break;
      from = tab + 1;
    }
    if (t.columns.empty()) t.columns = std::move(cells);
    else if (cells.size() == t.columns.size()) t.rows.push_back(std::move(cells));  // (kb lint refuses other rows)
  }
  return t;
}
}  // namespace

const tsv& embedded_table(std::string_view name) {
  static std::mutex mu;
  static std::map<std::string, tsv, std::less<>> parsed;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = parsed.find(name); it != parsed.end()) return it->second;
  const std::string path = "_tables/" + std::string(name) + ".tsv";
  std::string_view text;
  for (std::size_t i = 0; i < kEmbeddedCount; ++i)
    if (path == kEmbedded[i].name) text = kEmbedded[i].text;
  return parsed.emplace(std::string(name), parse(text)).first->second;
}

std::string cell_where(const tsv& t, std::string_view key_column, std::string_view key, std::string_view column) {
  const int k = t.column(key_column), c = t.column(column);
  if (k < 0 || c < 0) return {};
  for (const auto& r : t.rows)
    if (r[static_cast<std::size_t>(k)] == key) return r[static_cast<std::size_t>(c)];
  return {};
}

std::string words_where(const tsv& t, std::string_view flag) {
  const int w = t.column("word"), f = t.column(flag);
  std::string out;
  if (w < 0 || f < 0) return out;
  for (const auto& r : t.rows)
    if (r[static_cast<std::size_t>(f)] == "yes") out += (out.empty() ? "" : "|") + r[static_cast<std::size_t>(w)];
  return out;
}

std::string regex_alternation(const tsv& t, std::string_view column) {
  const int c = t.column(column);
  std::string out;
  if (c < 0) return out;
  for (const auto& r : t.rows) out += (out.empty() ? "(?:" : "|(?:") + r[static_cast<std::size_t>(c)] + ")";
  return out;
}

}  // namespace ff::kb::detail
