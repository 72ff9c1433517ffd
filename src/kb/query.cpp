// Queries over a loaded library for the CLI: the grep export, word search and typed-name resolution.
#include <algorithm>
#include <cctype>

#include "firstfault/kb.hpp"
#include "firstfault/text.hpp"

namespace ff::kb {

std::string to_ere(std::string_view re) {
  std::string o;
  bool in_class = false;
  for (std::size_t i = 0; i < re.size(); ++i) {
    char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      char n = re[++i];
      const char* rep = nullptr;
      switch (n) {
        case 'd': rep = in_class ? "0-9" : "[0-9]"; break;
        case 'D': rep = in_class ? nullptr : "[^0-9]"; break;
        case 's': rep = in_class ? "[:space:]" : "[[:space:]]"; break;
        case 'S': rep = in_class ? nullptr : "[^[:space:]]"; break;
        case 'w': rep = in_class ? "[:alnum:]_" : "[[:alnum:]_]"; break;
        case 'W': rep = in_class ? nullptr : "[^[:alnum:]_]"; break;
        default: break;
      }
      if (rep) {
        o += rep;
      } else {
        o += '\\';
        o += n;
      }
      continue;
    }
    if (!in_class && c == '(' && i + 2 < re.size() && re[i + 1] == '?') {
      if (re[i + 2] == ':') {  // (?:...) -> (...)
        o += '(';
        i += 2;
        continue;
      }
      if (re[i + 2] == 'P' && i + 3 < re.size() && re[i + 3] == '<') {  // (?P<name>...) -> (...)
        auto close = re.find('>', i);
        if (close != std::string_view::npos) {
          o += '(';
          i = close;
          continue;
        }
      }
      auto close = re.find(')', i);  // (?i) and other flag groups: dropped
      if (close != std::string_view::npos) {
        i = close;
        continue;
      }
    }
    // a lazy quantifier's '?' (after *, +, ?, {n,m}) is dropped: ERE has only greedy ones
    if (!in_class && c == '?' && !o.empty() && (o.back() == '*' || o.back() == '+' || o.back() == '?' || o.back() == '}'))
      continue;
    if (c == '[' && !in_class) {
      in_class = true;
    } else if (c == ']' && in_class && !o.empty() && o.back() != '[' &&
               !(o.size() >= 2 && o[o.size() - 2] == '[' && o.back() == '^')) {
      in_class = false;  // a ']' right after '[' or '[^' is a literal member
    }
    o += c;
  }
  return o;
}

namespace {
std::string lower(std::string_view s) {
  std::string o(s);
  for (auto& c : o) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return o;
}
bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }
}  // namespace

std::vector<const signature*> search(const library& lib, std::string_view query) {
  const std::string q = lower(query);
  std::vector<std::pair<int, const signature*>> found;
  for (const auto& s : lib.signatures) {
    std::string tags;
    for (const auto& t : s.tags) tags += " " + lower(t);
    int score = 0;
    if (has(lower(s.name), q)) score += 8;
    if (has(lower(s.title), q)) score += 4;
    if (has(lower(s.kind), q) || has(tags, q)) score += 2;
    if (has(lower(s.description), q)) score += 1;
    if (score > 0) found.emplace_back(score, &s);
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    // the most general entry has the shortest name (watchdog_timeout before watchdog_thread_terminated)
    if (a.second->name.size() != b.second->name.size()) return a.second->name.size() < b.second->name.size();
    if (a.second->is_cause() != b.second->is_cause()) return a.second->is_cause();
    if (a.second->priority != b.second->priority) return a.second->priority > b.second->priority;
    return a.second->name < b.second->name;
  });
  std::vector<const signature*> out;
  out.reserve(found.size());
  for (const auto& f : found) out.push_back(f.second);
  return out;
}

std::string resolve_name(const library& lib, const std::string& typed) {
  if (lib.find(typed) || lib.kind(typed)) return typed;
  std::vector<std::string> names;
  for (const auto& sig : lib.signatures) names.push_back(sig.name);
  for (const auto& k : lib.kinds) names.push_back(k.kind);
  auto near = text::closest(typed, names, 2);
  // Typed with other separators or case: that one name, no question asked (two such names: ambiguous).
  if (!near.empty() && text::name_key(near[0]) == text::name_key(typed) &&
      (near.size() < 2 || text::name_key(near[1]) != text::name_key(typed)))
    return near[0];
  return typed;
}

}  // namespace ff::kb
