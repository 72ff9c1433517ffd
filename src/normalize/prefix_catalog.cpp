// Prefix peeling driven by kb/_prefixes/*.yaml.
#include <re2/re2.h>
#include <re2/set.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <unordered_map>

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
};

bool prefix_catalog::impl::set_match(re2::StringPiece text, std::vector<int>& hits) const {
  // (A Vectorscan copy of this set, each pattern anchored, was measured: 2.4x the instructions of RE2::Set
  // on console lines, so the set stays in RE2.)
  hits.clear();
  return set->Match(text, &hits) && !hits.empty();
}

namespace {
// What one prefix match yields, kept per (prefix, matched bytes).
struct layer_fields {
  std::optional<int> rank, local_rank, task;
  std::optional<std::string> host;
  char level = 0;
  bool has_ts = false;
  std::optional<timestamp> ts;
};

// Per thread: the catalogue and default year it was filled for, and (prefix index, matched bytes) -> fields.
struct layer_memo {
  std::uint64_t owner = 0;  // impl::generation of the catalogue it was filled for
  int year = 0;
  std::unordered_map<std::string, layer_fields> map;
  std::string key;
  static constexpr std::size_t kMaxEntries = 16384;  // then it starts over (a log of all-distinct prefixes)
};

bool memo_safe(const std::string& regex) {
  for (const char* a : {"\\b", "\\B", "$", "\\z", "\\Z", "\\A", "(?m", "(?s"})
    if (regex.find(a) != std::string::npos) return false;
  for (std::size_t i = regex.find('^'); i != std::string::npos; i = regex.find('^', i + 1))
    if (i == 0 || regex[i - 1] != '[') return false;
  return true;
}
}  // namespace

prefix_catalog::prefix_catalog() : impl_(std::make_unique<impl>()) {}
prefix_catalog::~prefix_catalog() = default;
prefix_catalog::prefix_catalog(prefix_catalog&&) noexcept = default;
prefix_catalog& prefix_catalog::operator=(prefix_catalog&&) noexcept = default;

namespace {
std::string fmt_meta(const line_meta& m, const std::string& key) {
  if (key == "rank") return m.rank ? std::to_string(*m.rank) : "";
  if (key == "local_rank") return m.local_rank ? std::to_string(*m.local_rank) : "";
  if (key == "task") return m.task ? std::to_string(*m.task) : "";
  if (key == "host") return m.host.value_or("");
  if (key == "body") return std::string(m.body);
  if (key == "level") return m.level ? std::string(1, m.level) : "";
  if (key == "has_ts") return m.ts ? "true" : "false";
  return "<unknown key " + key + ">";
}
}  // namespace

result<prefix_catalog> prefix_catalog::load(const std::vector<std::pair<std::string, std::string>>& files) {
  prefix_catalog cat;
  static std::atomic<std::uint64_t> generations{0};
  cat.impl_->generation = ++generations;
  re2::RE2::Options ro;
  ro.set_log_errors(false);
  cat.impl_->set = std::make_unique<re2::RE2::Set>(ro, re2::RE2::ANCHOR_START);
  struct sample {
    std::string prefix, file, line;
    std::map<std::string, std::string> expect;
  };
  std::vector<sample> samples;
  for (const auto& [fname, text] : files) {
    YAML::Node doc;
    try {
      doc = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      return error{fname + ": invalid YAML: " + e.what()};
    }
    if (!doc["prefixes"] || !doc["prefixes"].IsSequence()) return error{fname + ": missing 'prefixes' list"};
    for (const auto& p : doc["prefixes"]) {
      prefix_def d;
      try {
        d.name = p["name"].as<std::string>();
        d.title = p["title"] ? p["title"].as<std::string>() : d.name;
        d.regex = p["regex"].as<std::string>();
        d.ts_format = p["ts_format"] ? p["ts_format"].as<std::string>() : "";
        d.midline = p["midline"] && p["midline"].as<bool>();
      } catch (const YAML::Exception& e) {
        return error{fname + ": prefix entry: " + e.what()};
      }
      impl::compiled c;
      c.re = std::make_unique<re2::RE2>(d.regex, ro);
      if (!c.re->ok()) return error{fname + ": prefix " + d.name + ": bad regex: " + c.re->error()};
      c.n_groups = c.re->NumberOfCapturingGroups();
      for (const auto& [gname, idx] : c.re->NamedCapturingGroups()) {
        if (gname == "rank") c.g_rank = idx;
        else if (gname == "local_rank") c.g_local_rank = idx;
        else if (gname == "host") c.g_host = idx;
        else if (gname == "task") c.g_task = idx;
        else if (gname == "ts") c.g_ts = idx;
        else if (gname == "level") c.g_level = idx;
      }
      // A prefix with a time in it matches new bytes on every line: a memo would only fill up.
      c.memo_ok = memo_safe(d.regex) && c.g_ts < 0;
      if (c.g_ts >= 0 && d.ts_format.empty()) return error{fname + ": prefix " + d.name + ": has (?P<ts>) but no ts_format"};
      std::string err;
      if (cat.impl_->set->Add(d.regex, &err) < 0) return error{fname + ": prefix " + d.name + ": " + err};
      c.ts_format = d.ts_format;
      cat.impl_->pats.push_back(std::move(c));
      if (p["samples"])
        for (const auto& s : p["samples"]) {
          sample smp{d.name, fname, s["line"].as<std::string>(), {}};
          if (s["expect"])
            for (const auto& kv : s["expect"]) smp.expect[kv.first.as<std::string>()] = kv.second.as<std::string>();
          samples.push_back(std::move(smp));
        }
      else
        return error{fname + ": prefix " + d.name + ": no samples (every prefix needs at least one)"};
      cat.defs_.push_back(std::move(d));
    }
  }
  if (!cat.impl_->set->Compile()) return error{"prefix catalogue: RE2::Set failed to compile (out of memory)"};
  // Samples are checked at every load: a prefix that does not peel its own sample is a load error.
  for (const auto& s : samples) {
    line_meta m;
    cat.normalize(s.line, m);
    bool peeled_own = false;
    for (std::size_t i = 0; i < m.n_prefixes; ++i) peeled_own |= (cat.defs_[m.prefixes[i]].name == s.prefix);
    if (!peeled_own) return error{s.file + ": prefix " + s.prefix + ": sample not peeled by it: " + s.line};
    for (const auto& [k, v] : s.expect) {
      std::string got = fmt_meta(m, k);
      if (got != v) return error{s.file + ": prefix " + s.prefix + ": sample gives " + k + "='" + got + "', expected '" + v + "': " + s.line};
    }
  }
  return cat;
}

void prefix_catalog::disable_shortcuts() {
  if (!impl_) return;
  for (auto& c : impl_->pats) c.memo_ok = false;
}

bool prefix_catalog::normalize(std::string_view line, line_meta& out) const {
  out.body = line;
  bool any = false;
  // scratch reused across calls (one allocation per thread, not per line)
  thread_local std::vector<int> hits;
  thread_local std::vector<re2::StringPiece> groups;
  thread_local layer_memo memo;
  bool jumped = false;
  for (int layer = 0; layer < kMaxLayers && !out.body.empty(); ++layer) {
    re2::StringPiece rest(out.body.data(), out.body.size());
    hits.clear();
    if (!impl_->set_match(rest, hits)) {
      // Nothing peels here: look once for a mid-line header after a '[' (a progress bar glued on).
      if (jumped) break;
      jumped = true;
      bool found = false;
      std::size_t from = 1;
      for (int tries = 0; tries < 16 && !found; ++tries) {
        auto pos = out.body.find('[', from);
        if (pos == std::string_view::npos) break;
        from = pos + 1;
        // mid-line headers start "[E1206 ...", "[W ...", "[rank3]:": skip every other '[' cheaply
        char next = pos + 1 < out.body.size() ? out.body[pos + 1] : '\0';
        if (next != 'I' && next != 'W' && next != 'E' && next != 'F' && next != 'r') continue;
        re2::StringPiece at(out.body.data() + pos, out.body.size() - pos);
        if (!impl_->set_match(at, hits)) continue;
        hits.erase(std::remove_if(hits.begin(), hits.end(), [&](int h) { return !defs_[static_cast<std::size_t>(h)].midline; }), hits.end());
        if (hits.empty()) continue;
        out.body.remove_prefix(pos);
        rest = at;
        found = true;
      }
      if (!found) break;
    }
    int id = *std::min_element(hits.begin(), hits.end());
    const auto& c = impl_->pats[static_cast<std::size_t>(id)];
    // The prefix's captures, from the memo when the same prefix matched the same bytes before. Exact:
    // with no assertion past the match, the leftmost-first path that ends at the match's end is the
    // same for any text that starts with those bytes (RE2 finds the extent with its DFA, cheaply).
    const layer_fields* f = nullptr;
    layer_fields fresh;
    std::size_t len = 0;
    if (c.memo_ok) {
      re2::StringPiece whole;
      if (!c.re->Match(rest, 0, rest.size(), re2::RE2::ANCHOR_START, &whole, 1)) break;
      len = whole.size();
      if (len == 0) break;  // a prefix must consume something
      if (memo.owner != impl_->generation || memo.year != default_year_ || memo.map.size() >= layer_memo::kMaxEntries) {
        memo.map.clear();
        memo.owner = impl_->generation;
        memo.year = default_year_;
      }
      memo.key.assign(reinterpret_cast<const char*>(&id), sizeof id);
      memo.key.append(rest.data(), len);
      if (auto it = memo.map.find(memo.key); it != memo.map.end()) f = &it->second;
    }
    if (!f) {
      groups.assign(static_cast<std::size_t>(c.n_groups) + 1, re2::StringPiece());
      if (!c.re->Match(rest, 0, rest.size(), re2::RE2::ANCHOR_START, groups.data(), static_cast<int>(groups.size()))) break;
      if (groups[0].size() == 0 || (c.memo_ok && groups[0].size() != len)) break;  // a prefix must consume something
      len = groups[0].size();
      auto grp = [&](int g) -> std::string_view {
        if (g < 0 || groups[static_cast<std::size_t>(g)].data() == nullptr) return {};
        auto& sp = groups[static_cast<std::size_t>(g)];
        return {sp.data(), sp.size()};
      };
      auto to_int = [](std::string_view v) -> std::optional<int> {
        if (v.empty() || v.size() > 9) return std::nullopt;
        int n = 0;
        for (char ch : v) {
          if (ch < '0' || ch > '9') return std::nullopt;
          n = n * 10 + (ch - '0');
        }
        return n;
      };
      fresh.rank = to_int(grp(c.g_rank));
      fresh.local_rank = to_int(grp(c.g_local_rank));
      fresh.task = to_int(grp(c.g_task));
      if (auto h = grp(c.g_host); !h.empty()) fresh.host = std::string(h);
      if (auto l = grp(c.g_level); !l.empty()) fresh.level = l[0];
      if (auto t = grp(c.g_ts); !t.empty()) {
        fresh.has_ts = true;
        fresh.ts = parse_timestamp(c.ts_format, t, default_year_);
      }
      if (c.memo_ok) f = &memo.map.emplace(memo.key, std::move(fresh)).first->second;
      else f = &fresh;
    }
    // Inner layers are more specific (a [rankN] tag beats a launcher's task label), so later wins.
    if (f->rank) out.rank = f->rank;
    if (f->local_rank) out.local_rank = f->local_rank;
    if (f->task) out.task = f->task;
    if (f->host) out.host = f->host;
    if (f->level) out.level = f->level;
    if (f->has_ts && !out.ts) out.ts = f->ts;
    out.prefixes[out.n_prefixes++] = static_cast<std::uint16_t>(id);
    out.body.remove_prefix(len);
    any = true;
  }
  return any;
}

}  // namespace ff::normalize
