// Upstream message catalogues (kb/_catalogue/*.tsv): parsing, line synthesis, and the coverage reading.
#include "firstfault/catalogue.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <re2/re2.h>

#include "firstfault/extract.hpp"
#include "firstfault/match.hpp"
#include "firstfault/normalize.hpp"
#include "firstfault/pipeline.hpp"

namespace fs = std::filesystem;

namespace ff::catalogue {

klass parse_class(std::string_view t) {
  klass k;
  if (t == "generic_error") k.is = klass::what::generic_error;
  else if (t == "irrelevant") k.is = klass::what::irrelevant;
  else if (t.rfind("benign:", 0) == 0 && t.size() > 7) {
    k.is = klass::what::benign;
    k.condition = std::string(t.substr(7));
  } else if (t.rfind("kind:", 0) == 0) {
    auto rest = t.substr(5);
    auto colon = rest.rfind(':');
    if (colon != std::string_view::npos && colon > 0) {
      auto role = rest.substr(colon + 1);
      if (role == "cause" || role == "collateral") {
        k.is = role == "cause" ? klass::what::kind_cause : klass::what::kind_collateral;
        k.kind = std::string(rest.substr(0, colon));
      }
    }
  }
  return k;
}

namespace {
std::vector<std::string> split_tabs(const std::string& l) {
  std::vector<std::string> cells;
  std::size_t from = 0;
  for (auto tab = l.find('\t');; tab = l.find('\t', from)) {
    cells.push_back(l.substr(from, tab == std::string::npos ? std::string::npos : tab - from));
    if (tab == std::string::npos) break;
    from = tab + 1;
  }
  return cells;
}
}  // namespace

result<project> parse(const std::string& file, std::string_view text) {
  project p;
  p.file = file;
  std::istringstream in{std::string(text)};
  std::string line;
  std::vector<std::string> cols;
  int no = 0;
  auto col = [&](const std::vector<std::string>& cells, std::string_view name) -> std::string {
    for (std::size_t i = 0; i < cols.size() && i < cells.size(); ++i)
      if (cols[i] == name) return cells[i];
    return "";
  };
  while (std::getline(in, line)) {
    ++no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line[0] == '#') {
      auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      auto key = line.substr(1, colon - 1);
      key.erase(0, key.find_first_not_of(' '));
      auto value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      if (key == "project") p.name = value;
      else if (key == "source") p.source = value;
      else if (key == "commit") p.commit = value;
      else if (key == "origin") p.origin = value;
      continue;
    }
    auto cells = split_tabs(line);
    if (cols.empty()) {
      cols = cells;
      if (std::find(cols.begin(), cols.end(), "template") == cols.end())
        return error{file + ":" + std::to_string(no) + ": the header row has no 'template' column", errc::knowledge_base};
      continue;
    }
    if (cells.size() != cols.size())
      return error{file + ":" + std::to_string(no) + ": " + std::to_string(cells.size()) + " cells, the header has " +
                   std::to_string(cols.size()), errc::knowledge_base};
    entry e;
    e.tmpl = col(cells, "template");
    e.level = col(cells, "level");
    e.form = col(cells, "form");
    e.source = col(cells, "source");
    e.cls = col(cells, "class");
    e.signature = col(cells, "signature");
    e.line_no = no;
    p.entries.push_back(std::move(e));
  }
  if (p.name.empty()) p.name = fs::path(file).stem().string();
  if (p.commit.empty()) return error{file + ": no '# commit:' line: every catalogue is pinned to a commit", errc::knowledge_base};
  return p;
}

result<std::vector<project>> load_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return error{dir + ": not a directory of catalogues", errc::knowledge_base};
  std::vector<fs::path> paths;
  for (const auto& it : fs::directory_iterator(dir, ec))
    if (it.is_regular_file() && it.path().extension() == ".tsv" && it.path().filename() != "classes.tsv" &&
        it.path().filename() != "hints.tsv") paths.push_back(it.path());
  std::sort(paths.begin(), paths.end());
  std::vector<project> out;
  for (const auto& path : paths) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    auto p = parse(path.string(), ss.str());
    if (!p) return p.error();
    out.push_back(std::move(p).value());
  }
  return out;
}

std::string fill(std::string_view t) {
  static constexpr std::array<std::string_view, 3> ints{"3", "42", "1"};
  static constexpr std::array<std::string_view, 3> strs{"node-1", "eth0", "/tmp/x"};
  std::size_t n_int = 0, n_str = 0;
  std::string out;
  out.reserve(t.size() + 16);
  for (std::size_t i = 0; i < t.size();) {
    auto at = [&](std::string_view ph) { return t.compare(i, ph.size(), ph) == 0; };
    if (t[i] == '<') {
      // <type=VALUE>: a placeholder whose typical value the catalogue gives (kb/_catalogue/hints.tsv)
      bool hinted = false;
      for (std::string_view type : {"<int=", "<hex=", "<float=", "<str="}) {
        auto close = at(type) ? t.find('>', i + type.size()) : std::string_view::npos;
        if (close == std::string_view::npos) continue;
        out += t.substr(i + type.size(), close - i - type.size());
        i = close + 1;
        hinted = true;
        break;
      }
      if (hinted) continue;
      if (at("<int>")) { out += ints[n_int++ % ints.size()]; i += 5; continue; }
      if (at("<hex>")) {  // "0x%lx" prints the 0x itself
        out += out.size() >= 2 && out.compare(out.size() - 2, 2, "0x") == 0 ? "1f" : "0x1f";
        i += 5;
        continue;
      }
      if (at("<float>")) { out += "1.5"; i += 7; continue; }
      if (at("<str>")) { out += strs[n_str++ % strs.size()]; i += 5; continue; }
    }
    out += t[i++];
  }
  return out;
}

namespace {
bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "path/to/file.py:123@abc" -> ("file.py", "123")
std::pair<std::string, std::string> file_and_line(std::string_view source) {
  auto at = source.find('@');
  auto loc = source.substr(0, at);
  auto colon = loc.rfind(':');
  auto path = loc.substr(0, colon);
  auto slash = path.rfind('/');
  std::string file(slash == std::string_view::npos ? path : path.substr(slash + 1));
  std::string line(colon == std::string_view::npos ? "1" : loc.substr(colon + 1));
  return {file.empty() ? "x" : file, line.empty() ? "1" : line};
}
}  // namespace

std::vector<std::string> synthesise(const entry& e, std::string_view project) {
  std::string msg = fill(e.tmpl);
  std::string base;
  if (e.form == "log") {
    auto [file, line] = file_and_line(e.source);
    if (project == "linux") {
      base = "[ 1234.567890] " + msg;
    } else if (ends_with(file, ".py")) {
      std::string word = e.level == "error" ? "ERROR" : e.level == "fatal" ? "CRITICAL" : e.level == "warning" ? "WARNING" : "INFO";
      base = "[2026-12-06 18:44:12,715] [" + word + "] [" + file + ":" + line + ":run] " + msg;
    } else {
      char letter = e.level == "error" ? 'E' : e.level == "fatal" ? 'F' : e.level == "warning" ? 'W' : 'I';
      base = std::string("[") + letter + "1206 18:44:12.715298746 " + file + ":" + line + "] " + msg;
    }
  } else {
    base = msg;
  }
  return {base, "[rank3]:" + base, "3: " + base, "2026-12-06T18:44:12.715Z " + base};
}

namespace {
// The reading of one line, as the diagnosis would have it (src/pipeline/collector.cpp, collector::match_line and
// add_suspicious): which signatures keep the line, whether a benign one explains it, how suspicious it is.
struct reading {
  bool benign = false;                         ///< a benign signature explains the whole line
  std::vector<const kb::signature*> failures;  ///< cause and symptom signatures that keep the line
  std::vector<std::string> looked_up;          ///< per failure: the kind its lookup table gives (an Xid's), or empty
  bool suspicious = false;                     ///< no signature, but the line looks like a failure
};

class reader {
 public:
  explicit reader(const pipeline::engine& eng) : eng_(eng), scratch_(eng.matcher) {}

  status read(const std::string& line, reading& r) {
    r = {};
    normalize::line_meta meta;
    eng_.prefixes.normalize(line, meta);
    hits_.clear();
    if (auto st = eng_.matcher.scan(meta.body, scratch_, hits_); !st) return st;
    const auto& lib = *eng_.lib;
    auto sig = [&](const match::hit& h) -> const kb::signature& { return lib.signatures[static_cast<std::size_t>(h.signature)]; };
    // A work line (saving a checkpoint, evaluating) explains nothing else on the line.
    std::erase_if(hits_, [&](const match::hit& h) { return sig(h).is_benign() && sig(h).has_tag("activity.work"); });
    const bool other = std::any_of(hits_.begin(), hits_.end(), [&](const match::hit& h) { return !sig(h).is_benign(); });
    std::erase_if(hits_, [&](const match::hit& h) { return other && sig(h).is_benign() && sig(h).layer_rank() > 0; });
    if (std::any_of(hits_.begin(), hits_.end(), [&](const match::hit& h) { return sig(h).is_benign(); })) {
      r.benign = true;
      return ok();
    }
    int best = 2;
    for (const auto& h : hits_) best = std::min(best, sig(h).layer_rank());
    for (const auto& h : hits_) {
      if (sig(h).layer_rank() != best) continue;
      const auto& s = sig(h);
      r.failures.push_back(&s);
      std::string kind;
      if (!s.lookup_table.empty())
        for (const auto& [field, value] : h.captured)
          if (field == s.lookup_field) kind = lib.lookup(s, value, "kind");
      r.looked_up.push_back(std::move(kind));
    }
    auto sev = extract::classify_line(meta.body, meta.level);
    r.suspicious = sev != extract::suspicion::none || !extract::exception_type(meta.body).empty();
    return ok();
  }

 private:
  const pipeline::engine& eng_;
  match::scratch scratch_;
  std::vector<match::hit> hits_;
};

// Whether a signature that kept a line reads it as `kind`: its own kind, the kind its lookup table gives the
// captured value (an Xid number's), or for a symptom a kind it is collateral of.
bool gives_kind(const kb::signature& s, const std::string& looked_up, const std::string& kind) {
  if (!looked_up.empty()) return looked_up == kind;
  if (s.kind == kind) return true;
  return !s.is_cause() && std::find(s.collateral_of.begin(), s.collateral_of.end(), kind) != s.collateral_of.end();
}

bool agrees(const klass& k, const entry& e, const reading& r) {
  const bool failure = !r.failures.empty() || r.suspicious;
  switch (k.is) {
    case klass::what::none: return false;
    case klass::what::generic_error: return failure;
    case klass::what::benign: return r.benign || !failure;
    case klass::what::irrelevant: return true;  // never printed by a training run: no reading of it is wrong
    case klass::what::kind_cause:
    case klass::what::kind_collateral:
      for (std::size_t i = 0; i < r.failures.size(); ++i)
        if ((!e.signature.empty() && r.failures[i]->name == e.signature) || gives_kind(*r.failures[i], r.looked_up[i], k.kind))
          return true;
      return false;
  }
  return false;
}
}  // namespace

result<coverage> evaluate(const pipeline::engine& eng, const project& p) {
  coverage c;
  c.name = p.name;
  c.source = p.source;
  c.commit = p.commit;
  c.templates = p.entries.size();
  reader rd(eng);
  reading r;
  for (const auto& e : p.entries) {
    template_result tr;
    tr.e = &e;
    auto k = parse_class(e.cls);
    tr.classified = k.is != klass::what::none;
    tr.recognised = tr.classified;
    auto lines = synthesise(e, p.name);
    tr.line = lines.front();
    for (const auto& line : lines) {
      if (auto st = rd.read(line, r); !st) return st.error();
      bool ok_here = tr.classified && agrees(k, e, r);
      if (&line == &lines.front() || !ok_here)
        for (const auto* s : r.failures) tr.matched.push_back(s->name);
      if (!ok_here) {
        tr.recognised = false;
        tr.line = line;
        break;
      }
    }
    std::sort(tr.matched.begin(), tr.matched.end());
    tr.matched.erase(std::unique(tr.matched.begin(), tr.matched.end()), tr.matched.end());
    c.classified += tr.classified;
    c.recognised += tr.recognised;
    c.results.push_back(std::move(tr));
  }
  return c;
}

std::vector<kb::lint_issue> lint_fingerprints(const kb::library& lib, const std::vector<project>& catalogues) {
  std::vector<std::string> lines;  // each template once, filled, with and without its form's header
  for (const auto& p : catalogues)
    for (const auto& e : p.entries) {
      lines.push_back(fill(e.tmpl));
      if (e.form == "log") lines.push_back(synthesise(e, p.name).front());
    }
  std::vector<kb::lint_issue> out;
  for (const auto& s : lib.signatures)
    for (const auto& fp : s.fingerprints) {
      re2::RE2 re(fp);
      if (!re.ok()) continue;  // lint() reports it
      auto hit = [&](const std::string& l) { return re2::RE2::PartialMatch(l, re); };
      if (std::any_of(s.positive.begin(), s.positive.end(), [&](const kb::example& ex) { return hit(ex.line); })) continue;
      if (std::any_of(lines.begin(), lines.end(), hit)) continue;
      out.push_back({s.file, s.name, "fingerprint matches no catalogued template and no positive example: " + fp});
    }
  return out;
}

}  // namespace ff::catalogue
