// Per-stream learning of line prefixes that the catalogue does not list (see normalize.hpp).
#include <re2/re2.h>

#include <cctype>

#include "firstfault/normalize.hpp"

namespace ff::normalize {

std::pair<std::string_view, std::string> leading_token(std::string_view line) {
  // Shapes a wrapper adds: "[anything]" (":"/space after), "word: ", "word | ", "[n]<stream>".
  static const re2::RE2 tok(R"(^(\[[^\[\]\s]{1,48}\](?:<\w{1,8}>)?:? ?|[\w.@-]{1,48}: |[\w.@-]{1,48} \| ))");
  re2::StringPiece in(line.data(), std::min<std::size_t>(line.size(), 96)), m;
  if (!re2::RE2::PartialMatch(in, tok, &m)) return {};
  std::string_view t(m.data(), m.size());
  if (t.size() >= line.size()) return {};  // the token is the whole line: nothing to peel off
  static const re2::RE2 words(R"((?i)error|warn|fatal|critical|info|debug|exception|traceback|usage|note|hint)");
  if (re2::RE2::PartialMatch(re2::StringPiece(t.data(), t.size()), words)) return {};
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
std::vector<long> numbers_in(std::string_view t) {
  std::vector<long> out;
  for (std::size_t i = 0; i < t.size();) {
    if (!std::isdigit(static_cast<unsigned char>(t[i]))) { ++i; continue; }
    long v = 0;
    std::size_t j = i;
    for (; j < t.size() && std::isdigit(static_cast<unsigned char>(t[j])); ++j) v = j - i < 9 ? v * 10 + (t[j] - '0') : v;
    out.push_back(v);
    i = j;
  }
  return out;
}
}  // namespace

void prefix_learner::observe(std::string_view line) {
  ++lines_;
  auto [t, shape] = leading_token(line);
  if (t.empty()) return;
  if (shapes_.size() >= 64 && !shapes_.count(shape)) return;  // bounded: a log of random tokens learns nothing
  auto& st = shapes_[shape];
  ++st.lines;
  auto nums = numbers_in(t);
  st.numbers = static_cast<int>(nums.size());
  st.values.resize(nums.size());
  for (std::size_t i = 0; i < nums.size(); ++i)
    if (st.values[i].size() < 4097) st.values[i].insert(nums[i]);
}

bool prefix_learner::peel(std::string_view line, line_meta& out, std::string_view& rest) const {
  auto [t, shape] = leading_token(line);
  if (t.empty()) return false;
  auto it = shapes_.find(shape);
  if (it == shapes_.end()) return false;
  const auto& st = it->second;
  if (st.lines < static_cast<std::size_t>(kMinLines) || static_cast<double>(st.lines) < kMinShare * static_cast<double>(lines_))
    return false;
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
    auto nums = numbers_in(t);
    if (small && not_a_counter && static_cast<std::size_t>(varying) < nums.size()) out.rank = static_cast<int>(nums[static_cast<std::size_t>(varying)]);
  }
  return true;
}

}  // namespace ff::normalize
