// Prefix peeling driven by kb/_prefixes/*.yaml.
#include <re2/re2.h>
#include <re2/set.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>

#include "firstfault/normalize.hpp"

namespace ff::normalize {

struct prefix_catalog::impl {
  struct compiled {
    std::unique_ptr<re2::RE2> re;
    int n_groups = 0;
    int g_rank = -1, g_local_rank = -1, g_host = -1, g_task = -1, g_ts = -1, g_level = -1;
    std::string ts_format;
  };
  std::vector<compiled> pats;
  std::unique_ptr<re2::RE2::Set> set;
};

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

bool prefix_catalog::normalize(std::string_view line, line_meta& out) const {
  out.body = line;
  bool any = false;
  // scratch reused across calls (one allocation per thread, not per line)
  thread_local std::vector<int> hits;
  thread_local std::vector<re2::StringPiece> groups;
  bool jumped = false;
  for (int layer = 0; layer < kMaxLayers && !out.body.empty(); ++layer) {
    re2::StringPiece rest(out.body.data(), out.body.size());
    hits.clear();
    if (!impl_->set->Match(rest, &hits) || hits.empty()) {
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
        hits.clear();
        if (!impl_->set->Match(at, &hits)) continue;
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
    groups.assign(static_cast<std::size_t>(c.n_groups) + 1, re2::StringPiece());
    if (!c.re->Match(rest, 0, rest.size(), re2::RE2::ANCHOR_START, groups.data(), static_cast<int>(groups.size()))) break;
    auto len = groups[0].size();
    if (len == 0) break;  // a prefix must consume something
    auto grp = [&](int g) -> std::string_view {
      if (g < 0 || groups[static_cast<std::size_t>(g)].data() == nullptr) return {};
      auto& s = groups[static_cast<std::size_t>(g)];
      return {s.data(), s.size()};
    };
    auto to_int = [](std::string_view s) -> std::optional<int> {
      if (s.empty() || s.size() > 9) return std::nullopt;
      int v = 0;
      for (char ch : s) {
        if (ch < '0' || ch > '9') return std::nullopt;
        v = v * 10 + (ch - '0');
      }
      return v;
    };
    // Inner layers are more specific (a [rankN] tag beats a launcher's task label), so later wins.
    if (auto v = to_int(grp(c.g_rank))) out.rank = v;
    if (auto v = to_int(grp(c.g_local_rank))) out.local_rank = v;
    if (auto v = to_int(grp(c.g_task))) out.task = v;
    if (auto h = grp(c.g_host); !h.empty()) out.host = std::string(h);
    if (auto l = grp(c.g_level); !l.empty()) out.level = l[0];
    if (auto t = grp(c.g_ts); !t.empty() && !out.ts) out.ts = parse_timestamp(c.ts_format, t, default_year_);
    out.prefixes[out.n_prefixes++] = static_cast<std::uint16_t>(id);
    out.body.remove_prefix(len);
    any = true;
  }
  return any;
}

}  // namespace ff::normalize
