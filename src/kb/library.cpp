// Loading signatures from YAML (the only place yaml-cpp exceptions are caught for signatures).
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <tuple>

#include "../base/cache.hpp"
#include "firstfault/kb.hpp"
#include "kb/embedded.hpp"

namespace fs = std::filesystem;

namespace ff::kb {

// The parsed signatures are cached beside the compiled databases: yaml-cpp took ~120 ms of every start.
// The cache is a flat byte image of the fields (detail::byte_writer; kKbCacheSchema changes with the
// struct): reading it is copying strings. Through a JSON DOM (CBOR with nlohmann-json) the read was 42% of
// a small diagnosis's instructions (91M of 215M), one allocation per value and again per field.
auto cache_fields(signature& s) {
  return std::tie(s.file, s.line_of_name, s.macros_used, s.title, s.id, s.name, s.status, s.level, s.description, s.author, s.date,
                  s.references, s.tags, s.systems, s.collateral_of, s.related, s.kind, s.category, s.role, s.inferred_by, s.layer,
                  s.initiator.kind, s.initiator.exit_code, s.match_in_stack, s.priority, s.fingerprints, s.extract, s.lookup_table,
                  s.lookup_field, s.root_cause, s.fix, s.verify, s.confirm, s.prevention, s.falsepositives, s.facts, s.transient_field, s.transient_above, s.fix_code, s.positive,
                  s.negative, s.field_order);
}
auto cache_fields(example& e) { return std::tie(e.line, e.expect); }
auto cache_fields(code_fix& c) { return std::tie(c.stack, c.code); }

status expand_macros(const macro_table& table, std::vector<std::string>& patterns, std::vector<std::string>* used) {
  auto note = [used](const std::string& name) {
    if (used && std::find(used->begin(), used->end(), name) == used->end()) used->push_back(name);
  };
  std::vector<std::string> out;
  for (const auto& p : patterns) {
    if (p.size() > 1 && p[0] == '@') {  // a whole item: the list's patterns, in order
      auto it = table.lists.find(p.substr(1));
      if (it == table.lists.end()) return error{"unknown list '" + p + "' (kb/_macros/*.yaml)", errc::knowledge_base};
      note(p);
      out.insert(out.end(), it->second.begin(), it->second.end());
      continue;
    }
    std::string e;
    for (std::size_t i = 0; i < p.size();) {
      if (p.compare(i, 2, "%{") != 0) {
        e += p[i++];
        continue;
      }
      auto close = p.find('}', i + 2);
      if (close == std::string::npos) return error{"unclosed '%{' in '" + p + "'", errc::knowledge_base};
      std::string name = p.substr(i + 2, close - i - 2);
      auto it = table.macros.find(name);
      if (it == table.macros.end()) return error{"unknown macro '%{" + name + "}' (kb/_macros/*.yaml)", errc::knowledge_base};
      note("%{" + name + "}");
      e += it->second;
      i = close + 1;
    }
    out.push_back(std::move(e));
  }
  patterns = std::move(out);
  return ok();
}

role parse_role(std::string_view t) {
  return t == "cause" ? role::cause : t == "symptom" ? role::symptom : t == "benign" ? role::benign : role::unknown;
}

layer parse_layer(std::string_view t) {
  return t.empty() || t == "specific" ? layer::specific : t == "family" ? layer::family : t == "generic" ? layer::generic : layer::unknown;
}

initiator parse_initiator(std::string_view t) {
  using how = initiator::how;
  if (t.empty()) return {how::none, 0};
  if (t == "printing_rank") return {how::printing_rank, 0};
  if (t == "named_rank") return {how::named_rank, 0};
  if (t == "rank_zero") return {how::rank_zero, 0};
  constexpr std::string_view kExit = "exit_code:";  // exit_code:N, N an integer (negative: a signal)
  if (t.substr(0, kExit.size()) == kExit) {
    auto n = t.substr(kExit.size());
    int v = 0;
    auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
    if (!n.empty() && ec == std::errc() && end == n.data() + n.size()) return {how::exit_code, v};
  }
  return {how::unknown, 0};
}

std::string_view to_string(role r) {
  switch (r) {
    case role::cause: return "cause";
    case role::symptom: return "symptom";
    case role::benign: return "benign";
    case role::unknown: break;
  }
  return "unknown";
}

std::string_view to_string(layer l) {
  switch (l) {
    case layer::specific: return "specific";
    case layer::family: return "family";
    case layer::generic: return "generic";
    case layer::unknown: break;
  }
  return "unknown";
}

std::string to_string(const initiator& i) {
  switch (i.kind) {
    case initiator::how::none: return "";
    case initiator::how::printing_rank: return "printing_rank";
    case initiator::how::named_rank: return "named_rank";
    case initiator::how::rank_zero: return "rank_zero";
    case initiator::how::exit_code: return "exit_code:" + std::to_string(i.exit_code);
    case initiator::how::unknown: break;
  }
  return "unknown";
}

namespace {

// Bump when `signature` gains, loses or changes a field (the size catches most changes by itself).
const std::string kKbCacheSchema = "kb-signatures-7-" + std::to_string(sizeof(signature));

std::vector<std::string> str_list(const YAML::Node& n) {
  std::vector<std::string> out;
  if (!n) return out;
  if (n.IsScalar()) {
    out.push_back(n.as<std::string>());
    return out;
  }
  for (const auto& x : n) out.push_back(x.as<std::string>());
  return out;
}

std::string str(const YAML::Node& n) { return n && n.IsScalar() ? n.as<std::string>() : std::string(); }

std::vector<example> examples(const YAML::Node& n) {
  std::vector<example> out;
  if (!n) return out;
  for (const auto& e : n) {
    example ex;
    if (e.IsScalar()) {
      ex.line = e.as<std::string>();
    } else {
      ex.line = str(e["line"]);
      if (e["expect"])
        for (const auto& kv : e["expect"]) ex.expect[kv.first.as<std::string>()] = kv.second.as<std::string>();
    }
    out.push_back(std::move(ex));
  }
  return out;
}

result<signature> parse_signature(const std::string& file, const std::string& text, const macro_table& macros) {
  signature s;
  s.file = file;
  try {
    YAML::Node d = YAML::Load(text);
    if (!d.IsMap()) return error{file + ": not a YAML mapping", errc::knowledge_base};
    for (const auto& kv : d) s.field_order.push_back(kv.first.as<std::string>());
    s.title = str(d["title"]);
    s.id = str(d["id"]);
    s.name = str(d["name"]);
    if (d["name"]) s.line_of_name = d["name"].Mark().line + 1;
    s.status = str(d["status"]);
    s.level = str(d["level"]);
    s.description = str(d["description"]);
    s.references = str_list(d["references"]);
    s.author = str(d["author"]);
    s.date = str(d["date"]);
    s.tags = str_list(d["tags"]);
    if (d["related"])
      for (const auto& r : d["related"]) {
        if (r.IsScalar()) s.related.push_back(r.as<std::string>());
        else if (r["name"]) s.related.push_back(r["name"].as<std::string>());
        else if (r["id"]) s.related.push_back(r["id"].as<std::string>());
      }
    s.kind = str(d["kind"]);
    s.category = str(d["category"]);
    s.role = parse_role(str(d["role"]));
    s.layer = parse_layer(str(d["layer"]));
    s.priority = d["priority"] ? d["priority"].as<int>() : 0;
    s.systems = str_list(d["systems"]);
    s.collateral_of = str_list(d["collateral_of"]);
    s.inferred_by = str(d["inferred_by"]);
    s.initiator = parse_initiator(str(d["initiator"]));
    s.match_in_stack = d["match_in_stack"] && d["match_in_stack"].as<bool>();
    s.fingerprints = str_list(d["fingerprints"]);
    s.extract = str_list(d["extract"]);
    for (auto* patterns : {&s.fingerprints, &s.extract})
      if (auto st = expand_macros(macros, *patterns, &s.macros_used); !st) return error{file + ": " + st.error().message, errc::knowledge_base};
    if (auto lk = str(d["lookup"]); !lk.empty()) {
      auto colon = lk.find(':');
      if (colon == std::string::npos) return error{file + ": lookup must be TABLE:FIELD, got '" + lk + "'", errc::knowledge_base};
      s.lookup_table = lk.substr(0, colon);
      s.lookup_field = lk.substr(colon + 1);
    }
    s.root_cause = str(d["root_cause"]);
    s.fix = str_list(d["fix"]);
    s.verify = str_list(d["verify"]);
    s.confirm = str_list(d["confirm"]);
    s.prevention = str_list(d["prevention"]);
    s.falsepositives = str_list(d["falsepositives"]);
    s.facts = str_list(d["facts"]);
    if (const auto& t = d["transient_above"]) {
      s.transient_field = str(t["field"]);
      try {
        s.transient_above = t["value"].as<int>();
      } catch (const std::exception&) {
        return error{file + ": transient_above.value must be a whole number", errc::knowledge_base};
      }
      if (s.transient_field.empty()) return error{file + ": transient_above needs a field (an extract group)", errc::knowledge_base};
    }
    if (d["fix_code"])
      for (const auto& c : d["fix_code"]) s.fix_code.push_back({str(c["stack"]), str(c["code"])});
    if (d["examples"]) {
      s.positive = examples(d["examples"]["positive"]);
      s.negative = examples(d["examples"]["negative"]);
    }
  } catch (const YAML::Exception& e) {
    return error{file + ":" + std::to_string(e.mark.line + 1) + ": invalid signature: " + e.msg, errc::knowledge_base};
  }
  if (s.name.empty()) return error{file + ": signature has no name", errc::knowledge_base};
  return s;
}


}  // namespace

namespace {
// The built-in "builtin:_macros/..." or a --kb directory's "_macros/..." (load() adds that prefix), never a
// path that merely has "_macros/" somewhere in it.
bool is_macro_file(const std::string& name) { return name.rfind("builtin:_macros/", 0) == 0 || name.rfind("_macros/", 0) == 0; }

bool is_signature_file(const std::string& name) {
  bool tsv = name.size() >= 4 && name.substr(name.size() - 4) == ".tsv";
  return !tsv && name.find("_encyclopedia/") == std::string::npos && name.find("_prefixes/") == std::string::npos &&
         !is_macro_file(name);
}

// kb/_macros/*.yaml: `macros:` (name -> pattern text) and `lists:` (name -> list of patterns). A later
// file (a --kb directory) may redefine a name.
status read_macros(const std::string& file, const std::string& text, macro_table& out) {
  try {
    YAML::Node d = YAML::Load(text);
    if (!d.IsMap()) return error{file + ": not a YAML mapping", errc::knowledge_base};
    for (const auto& kv : d) {
      auto key = kv.first.as<std::string>();
      if (key != "macros" && key != "lists") return error{file + ": unknown key '" + key + "' (macros, lists)", errc::knowledge_base};
    }
    // One level: a definition naming another would stay literal text in a pattern, so it is refused.
    auto nested = [](const std::string& v) { return v.find("%{") != std::string::npos || (!v.empty() && v[0] == '@'); };
    if (d["macros"])
      for (const auto& kv : d["macros"]) {
        auto v = kv.second.as<std::string>();
        if (nested(v)) return error{file + ": macro " + kv.first.as<std::string>() + " names another definition (one level only)", errc::knowledge_base};
        out.macros[kv.first.as<std::string>()] = v;
      }
    if (d["lists"])
      for (const auto& kv : d["lists"]) {
        auto items = str_list(kv.second);
        if (std::any_of(items.begin(), items.end(), nested))
          return error{file + ": list " + kv.first.as<std::string>() + " names another definition (one level only)", errc::knowledge_base};
        out.lists[kv.first.as<std::string>()] = std::move(items);
      }
  } catch (const YAML::Exception& e) {
    return error{file + ": " + e.what(), errc::knowledge_base};
  }
  return ok();
}

// The cache file for this exact list of signature files (names and texts), or "" when caching is off.
std::string signature_cache_path(const std::vector<std::pair<std::string, std::string>>& files) {
  std::string dir = ff::detail::cache_dir();
  if (dir.empty()) return "";
  auto sig = [](const std::string& name) { return is_signature_file(name) || is_macro_file(name); };
  return dir + "/kb-" + ff::detail::files_hash_hex(files, kKbCacheSchema, sig) + ".bin";
}

// Signatures in file order, as parse_signature gave them; false on any doubt (absent, foreign, stale).
bool load_signature_cache(const std::string& path, std::size_t expected, std::vector<signature>& out) {
  ff::detail::cache_bytes bytes;
  if (path.empty() || !bytes.read(path, 64u << 20)) return false;
  ff::detail::byte_reader r(bytes.view());
  r.get(out);
  if (r.ok() && r.at_end() && out.size() == expected) return true;
  out.clear();
  return false;
}
}  // namespace

result<library> library::from_files(const std::vector<std::pair<std::string, std::string>>& files) {
  library lib;
  std::size_t n_sig_files = 0;
  for (const auto& f : files) n_sig_files += is_signature_file(f.first);
  const std::string cache = n_sig_files > 0 ? signature_cache_path(files) : "";
  std::vector<signature> parsed;  // every signature file's result, in file order (what the cache holds)
  for (const auto& [name, text] : files)  // shared definitions first: any signature may use them
    if (is_macro_file(name))
      if (auto st = read_macros(name, text, lib.macros); !st) return st.error();
  const bool cached = load_signature_cache(cache, n_sig_files, parsed);
  if (!cached) parsed.reserve(n_sig_files);
  std::size_t next_sig = 0;
  for (const auto& [name, text] : files) {
    if (name.find("_tables/") != std::string::npos && name.size() >= 4 && name.substr(name.size() - 4) == ".tsv") {
      auto slash = name.find_last_of('/');
      table t;
      t.name = name.substr(slash + 1, name.size() - slash - 5);
      std::istringstream in(text);
      std::string line;
      auto split = [](const std::string& l) {
        std::vector<std::string> cells;
        std::size_t from = 0;
        for (auto tab = l.find('\t'); ; tab = l.find('\t', from)) {
          cells.push_back(l.substr(from, tab == std::string::npos ? std::string::npos : tab - from));
          if (tab == std::string::npos) break;
          from = tab + 1;
        }
        return cells;
      };
      int line_no = 0;
      while (std::getline(in, line)) {
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || line[0] == '#') continue;
        auto cells = split(line);
        if (t.columns.empty()) { t.columns = cells; continue; }
        if (cells.size() != t.columns.size())
          return error{name + ":" + std::to_string(line_no) + ": " + std::to_string(cells.size()) + " cells, the header has " +
                       std::to_string(t.columns.size()), errc::knowledge_base};
        auto key = cells[0];
        t.order.push_back(key);
        if (!t.rows.emplace(key, std::move(cells)).second) return error{name + ":" + std::to_string(line_no) + ": duplicate key " + key, errc::knowledge_base};
      }
      lib.tables[t.name] = std::move(t);
      continue;
    }
    if (name.size() >= 4 && name.substr(name.size() - 4) == ".tsv") {
      std::istringstream in(text);
      std::string line;
      bool header = true;
      while (std::getline(in, line)) {
        if (header) { header = false; continue; }
        if (line.empty()) continue;
        auto t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
        if (t1 == std::string::npos || t2 == std::string::npos) return error{name + ": malformed line: " + line, errc::knowledge_base};
        lib.kinds.push_back({line.substr(0, t1), line.substr(t1 + 1, t2 - t1 - 1), line.substr(t2 + 1)});
      }
      continue;
    }
    if (name.find("_encyclopedia/") != std::string::npos) {
      lib.encyclopedia_files.emplace_back(name, text);
      continue;
    }
    if (name.find("_prefixes/") != std::string::npos) {
      lib.prefix_files.emplace_back(name, text);
      continue;
    }
    if (is_macro_file(name)) continue;
    if (!cached) {
      auto sig = parse_signature(name, text, lib.macros);
      if (!sig) return sig.error();
      parsed.push_back(std::move(sig).value());
    }
    if (next_sig >= parsed.size()) return error{name + ": signature files counted and read disagree (knowledge base cache)", errc::knowledge_base};
    signature s = cached ? std::move(parsed[next_sig]) : parsed[next_sig];
    ++next_sig;
    auto it = std::find_if(lib.signatures.begin(), lib.signatures.end(), [&](const signature& o) { return o.name == s.name; });
    if (it != lib.signatures.end()) *it = std::move(s);  // a user's file overrides a built-in one
    else lib.signatures.push_back(std::move(s));
  }
  if (!cached && !cache.empty()) {
    ff::detail::byte_writer w;
    w.put(parsed);
    ff::detail::store_cache_file(cache, w.out);
  }
  lib.content_hash = ff::detail::files_hash_hex(files, "", [](const std::string&) { return true; });
  return lib;
}

result<library> library::load(bool builtin, const std::vector<std::string>& extra_dirs) {
  std::vector<std::pair<std::string, std::string>> files;
  if (builtin)
    for (std::size_t i = 0; i < detail::kEmbeddedCount; ++i)
      files.emplace_back(std::string("builtin:") + detail::kEmbedded[i].name, std::string(detail::kEmbedded[i].text));
  for (const auto& dir : extra_dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return error{dir + ": --kb expects a directory of signature files", errc::knowledge_base};
    std::vector<fs::path> paths;
    for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      auto ext = it->path().extension().string();
      bool table = ext == ".tsv" && it->path().parent_path().filename() == "_tables";
      if (it->is_regular_file() && (ext == ".yaml" || ext == ".yml" || it->path().filename() == "kinds.tsv" || table))
        paths.push_back(it->path());
    }
    std::sort(paths.begin(), paths.end());
    for (const auto& p : paths) {
      std::ifstream in(p, std::ios::binary);
      if (!in) return error{p.string() + ": cannot read", errc::knowledge_base};
      std::ostringstream ss;
      ss << in.rdbuf();
      auto rel = fs::relative(p, dir).string();
      std::string key = p.string();
      if (rel.rfind("_prefixes/", 0) == 0) key = "_prefixes/" + key;
      if (rel.rfind("_encyclopedia/", 0) == 0) key = "_encyclopedia/" + key;
      if (rel.rfind("_macros/", 0) == 0) key = "_macros/" + key;
      if (rel.rfind("_tables/", 0) == 0) key = "_tables/" + p.filename().string();
      files.emplace_back(key, ss.str());
    }
  }
  return from_files(files);
}

const signature* library::find(std::string_view name) const {
  for (const auto& s : signatures)
    if (s.name == name) return &s;
  return nullptr;
}

std::string table::get(const std::string& key, const std::string& column) const {
  auto r = rows.find(key);
  if (r == rows.end()) return "";
  for (std::size_t i = 0; i < columns.size(); ++i)
    if (columns[i] == column) return r->second[i];
  return "";
}

bool table::has_column(const std::string& column) const {
  return std::find(columns.begin(), columns.end(), column) != columns.end();
}

std::string library::lookup(const signature& s, const std::string& key, const std::string& column) const {
  if (s.lookup_table.empty()) return "";
  auto t = tables.find(s.lookup_table);
  return t == tables.end() ? "" : t->second.get(key, column);
}

const kind_info* library::kind(std::string_view k) const {
  for (const auto& x : kinds)
    if (x.kind == k) return &x;
  return nullptr;
}

}  // namespace ff::kb
