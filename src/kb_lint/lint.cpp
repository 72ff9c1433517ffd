// `firstfault kb lint` and `firstfault kb test`.
#include <re2/re2.h>

#include <algorithm>
#include <functional>
#include <set>

#include "firstfault/kb.hpp"
#include "firstfault/ingest.hpp"
#include "firstfault/kb_lint.hpp"
#include "firstfault/mask.hpp"
#include "firstfault/text.hpp"
#include "firstfault/match.hpp"

namespace ff::kb {

namespace {
const std::vector<std::string> kOrder = {
    "title", "id", "name", "status", "level", "description", "references", "author", "date", "modified", "tags",
    "related", "kind", "category", "role", "layer", "priority", "systems", "collateral_of", "initiator", "match_in_stack", "inferred_by", "fingerprints",
    "extract", "lookup", "transient_above", "root_cause", "facts", "fix", "fix_code", "verify", "confirm", "prevention", "falsepositives", "examples"};
const std::vector<std::string> kRequired = {"title", "id", "name", "status", "level", "description", "references",
                                            "author", "date", "tags", "kind", "category", "role", "systems",
                                            "root_cause", "fix", "verify", "confirm", "examples"};
// The areas are data (kb/_tables/areas.tsv: folder -> name prefixes). A built-in file's folder must be an
// area and its name must start with one of that area's prefixes; a --kb file (any folder) only needs a
// prefix of some area. Returns the problem, or "".
std::string check_area(const library& lib, const signature& s) {
  auto t = lib.tables.find("areas");
  if (t == lib.tables.end()) return "kb/_tables/areas.tsv is missing: the areas cannot be checked";
  auto prefixes_of = [](const std::string& cell) {
    std::vector<std::string> out;
    for (std::size_t b = 0; b <= cell.size();) {
      auto e = cell.find(',', b);
      if (e == std::string::npos) e = cell.size();
      if (e > b) out.push_back(cell.substr(b, e - b) + "_");
      b = e + 1;
    }
    return out;
  };
  auto starts = [&](const std::vector<std::string>& ps) {
    return std::any_of(ps.begin(), ps.end(), [&](const std::string& p) { return s.name.rfind(p, 0) == 0; });
  };
  constexpr std::string_view kBuiltin = "builtin:";
  if (s.file.rfind(kBuiltin, 0) == 0) {
    std::string rel = s.file.substr(kBuiltin.size());
    std::string folder = rel.substr(0, rel.find('/'));
    auto cell = t->second.get(folder, "prefixes");
    if (cell.empty()) return "folder '" + folder + "' is not an area in kb/_tables/areas.tsv";
    auto ps = prefixes_of(cell);
    if (!starts(ps)) return "name must start with " + cell + " followed by '_' (the prefixes of area " + folder + ", kb/_tables/areas.tsv)";
    return "";
  }
  for (const auto& [_, row] : t->second.rows)
    if (row.size() > 1 && starts(prefixes_of(row[1]))) return "";
  return "name must start with the prefix of an area (kb/_tables/areas.tsv)";
}

bool one_of(const std::string& v, std::initializer_list<const char*> xs) {
  return std::any_of(xs.begin(), xs.end(), [&](const char* x) { return v == x; });
}
using add_fn = const std::function<void(const std::string&)>&;

// Fields known, in the documented order, the required ones present; the name's form and file stem.
void lint_layout(const signature& s, add_fn add) {
  static const re2::RE2 name_re("[a-z0-9_]{8,64}");
  for (const auto& f : s.field_order)
    if (std::find(kOrder.begin(), kOrder.end(), f) == kOrder.end()) add("unknown field '" + f + "'");
  std::vector<std::size_t> pos;
  for (const auto& f : s.field_order) {
    auto it = std::find(kOrder.begin(), kOrder.end(), f);
    if (it != kOrder.end()) pos.push_back(static_cast<std::size_t>(it - kOrder.begin()));
  }
  if (!std::is_sorted(pos.begin(), pos.end())) add("fields are not in the documented order (docs/signatures.md)");
  for (const auto& r : kRequired)
    if (std::find(s.field_order.begin(), s.field_order.end(), r) == s.field_order.end()) add("missing field '" + r + "'");
  if (!re2::RE2::FullMatch(s.name, name_re)) add("name must match [a-z0-9_]{8,64}");
  auto stem = s.file.substr(s.file.find_last_of('/') + 1);
  stem = stem.substr(0, stem.find('.'));
  if (stem != s.name) add("name differs from the file stem '" + stem + "'");
}

void lint_env_vars(const library& lib, const signature& s, add_fn add) {
  // Every NCCL/torch environment variable named in the text must be a real one (kb/_tables/env_vars.tsv,
  // each row with its upstream source): a made-up name in a fix costs an engineer a rerun.
  if (auto tv = lib.tables.find("env_vars"); tv != lib.tables.end()) {
    static const re2::RE2 var_re(R"(\b((?:NCCL|TORCH|PYTORCH)_[A-Z0-9_]*[A-Z0-9]))");
    std::vector<std::string> texts = {s.title, s.description, s.root_cause};
    for (const auto* list : {&s.fix, &s.verify, &s.confirm, &s.prevention, &s.falsepositives}) texts.insert(texts.end(), list->begin(), list->end());
    for (const auto& c : s.fix_code) texts.push_back(c.code);
    std::set<std::string> unknown;
    for (const auto& t : texts) {
      re2::StringPiece in(t);
      std::string v;
      while (re2::RE2::FindAndConsume(&in, var_re, &v))
        if (!tv->second.rows.count(v)) unknown.insert(v);
    }
    for (const auto& v : unknown) add("names environment variable " + v + ", which kb/_tables/env_vars.tsv does not list (add it with its upstream source, or fix the name)");
  }
}

// A command that only watches (a refresh loop, a follow, a live monitor) prints numbers for someone to stare
// at; it never says whether the fix worked. Returns what it is, or "" for a one-shot command.
std::string monitor_in(const std::string& cmd) {
  static const re2::RE2 loop_re(R"(\bnvidia-smi\b[^|;&]*\s(?:-l|-lms|--loop|--loop-ms)(?:\s|=|\d|$))");
  static const re2::RE2 watch_re(R"((?:^|[|;&(]\s*|\s)watch\s)");
  static const re2::RE2 follow_re(R"(\btail\s+(?:-[A-Za-z0-9]*[fF]\b|--follow))");
  static const re2::RE2 kubectl_top_re(R"(\bkubectl\s+top\b)");
  static const re2::RE2 dmon_re(R"(\bdmon\b)");
  static const re2::RE2 top_re(R"((?:^|[|;&(]\s*)(?:h|nv)?top\b)");
  const std::pair<const re2::RE2*, const char*> kinds[] = {
      {&loop_re, "nvidia-smi -l, a refresh loop"}, {&watch_re, "watch, a refresh loop"},
      {&follow_re, "tail -f, which follows the file"}, {&kubectl_top_re, "kubectl top, current usage without a verdict"},
      {&dmon_re, "dmon, a device monitor"}, {&top_re, "top, an interactive monitor"}};
  for (const auto& [re, what] : kinds)
    if (re2::RE2::PartialMatch(cmd, *re)) return what;
  return "";
}

// The pass result is what follows "  # ": what the command prints once the problem is fixed. Returns it, or
// "" when the entry states none.
std::string pass_result(const std::string& v) {
  auto at = v.find("  # ");
  if (at == std::string::npos) return "";
  auto r = v.substr(at + 4);
  r.erase(0, r.find_first_not_of(' '));
  return r;
}

void lint_verify(const library& lib, const signature& s, add_fn add) {
  // A verify entry is a command, runnable as printed once its variables are set (kb/_tables/verify_vars.tsv),
  // that proves something: prose belongs under confirm. It is a pass/fail check (issue 46): "  # " and what
  // it prints once the problem is fixed follow the command, and it runs once rather than watching.
  for (const auto& v : s.verify) {
    const std::string cmd = v.substr(0, v.find("  #"));  // "  # ..." is the expected result
    if (pass_result(v).empty())
      add("verify states no pass result: follow the command with '  # ' and what it prints once the problem is fixed: " + v);
    if (auto what = monitor_in(cmd); !what.empty())
      add("verify only watches (" + what + "): give a one-shot check with a stated pass result, e.g. a short run piped to "
          "grep -c for the error, '# 0': " + v);
    static const re2::RE2 placeholder_re(R"(<[A-Za-z_][A-Za-z0-9_ -]*>)");
    static const re2::RE2 prose_re(R"(^[A-Z][a-z]+ )");
    static const re2::RE2 shell_var_re(R"(\$\{?([A-Za-z_][A-Za-z0-9_]*))");
    if (re2::RE2::PartialMatch(cmd, placeholder_re)) add("verify has a <placeholder> (use a $VARIABLE from kb/_tables/verify_vars.tsv): " + v);
    if (re2::RE2::PartialMatch(cmd, prose_re)) add("verify is prose, not a command (move it to confirm): " + v);
    if (cmd.find("...") != std::string::npos || cmd.find("\u2026") != std::string::npos)
      add("verify has '...' where an argument belongs: it is not runnable as printed: " + v);
    if (auto tv = lib.tables.find("verify_vars"); tv != lib.tables.end()) {
      re2::StringPiece in(cmd);
      std::string var;
      while (re2::RE2::FindAndConsume(&in, shell_var_re, &var))
        if (!tv->second.rows.count(var)) add("verify uses $" + var + ", which kb/_tables/verify_vars.tsv does not list: " + v);
    }
    // nccl-tests with one GPU per process only crosses the network when a launcher spreads it over hosts
    // (https://github.com/NVIDIA/nccl-tests#usage)
    if (cmd.find("_perf") != std::string::npos && cmd.find("-g 1") != std::string::npos && cmd.find("mpirun") == std::string::npos &&
        cmd.find("srun") == std::string::npos)
      add("verify runs nccl-tests with -g 1 in one process: it never touches the network (launch it with mpirun or srun across hosts): " + v);
    if (cmd.find("--show-all") != std::string::npos) add("verify uses kubectl --show-all, which kubectl no longer has: " + v);
    if (cmd.find("python -c") != std::string::npos && cmd.find("max_memory_allocated") != std::string::npos)
      add("verify reads torch.cuda.max_memory_allocated() in a fresh process, where it is always 0: " + v);
  }
}

void lint_root_cause_sentence(const signature& s, add_fn add) {
  // The root-cause sentence must read well when the run has none of its values (text::fill_sentence):
  // no placeholder, no "(unknown)", no word left dangling before the full stop.
  if (s.root_cause.find('{') != std::string::npos) {
    static const re2::RE2 dangling(R"((?i)\b(?:on|at|for|in|of|to|with|from|and|or|than|while|a|an|the|is|was)[.,:;]|\(unknown|\{)");
    std::string bare = text::fill_sentence(s.root_cause, [](const std::string&) { return std::string(); });
    std::string full = text::fill_sentence(s.root_cause, [](const std::string&) { return std::string("X"); });
    auto count = [&](const std::string& t) {
      re2::StringPiece in(t);
      int n = 0;
      while (re2::RE2::FindAndConsume(&in, dangling)) ++n;
      return n;
    };
    if (count(bare) > count(full)) add("root_cause without its values reads badly: '" + bare + "' (write it so each placeholder can go)");
  }
}

// The values of the enumerated fields and what must go together (role, kind, priority, examples).
void lint_values(const library& lib, const signature& s, add_fn add) {
  if (!one_of(s.status, {"experimental", "test", "stable", "deprecated"})) add("bad status '" + s.status + "'");
  if (!one_of(s.level, {"informational", "low", "medium", "high", "critical"})) add("bad level '" + s.level + "'");
  if (s.role == role::unknown) add("role must be cause, symptom or benign");
  if (s.layer == layer::unknown) add("layer must be specific, family or generic");
  if (s.is_benign() && s.kind != "healthy") add("a benign signature has kind healthy");
  if (s.is_benign() && s.priority != 0) add("a benign signature has no priority");
  if (!s.is_benign() && s.kind == "healthy") add("kind healthy is only for role: benign");
  const auto* k = lib.kind(s.kind);
  if (!k) add("kind '" + s.kind + "' is not in kinds.tsv");
  else if (k->category != s.category) add("category should be '" + k->category + "' for kind " + s.kind);
  if (s.is_cause() && (s.priority < 1 || s.priority > 100)) add("a cause needs priority 1-100");
  if (s.initiator.kind == initiator::how::unknown)
    add("initiator must be printing_rank, named_rank, rank_zero or exit_code:N");
  if (s.references.empty()) add("no references");
  if (s.fix.empty() || s.verify.empty() || s.confirm.empty()) add("fix, verify and confirm must not be empty");
  if (s.fingerprints.empty() && s.inferred_by.empty()) add("no fingerprints and no inferred_by rule");
  if (s.positive.empty()) add("no positive example");
  if (s.negative.empty() && s.inferred_by.empty()) add("no negative example");
}

// Every pattern in the common subset of RE2 and Vectorscan and compiling in both; the lookup table and every
// placeholder of the root-cause sentence backed by an extract group, a table column or a built-in.
void lint_patterns(const library& lib, const signature& s, add_fn add) {
  static const re2::RE2 group_re(R"(\(\?P<(\w+)>)");
  static const re2::RE2 bad_syntax_re(R"(\(\?[=!]|\(\?<[=!]|\(\?<\w|\(\?>|\\[1-9]|\\Q|[*+?]\+|\\['"])");  // \' is not an escape in rg or grep -E
  std::set<std::string> groups;
  auto check = [&](const std::string& p, bool vs) {
    if (re2::RE2::PartialMatch(p, bad_syntax_re)) add("pattern uses syntax outside RE2/Vectorscan's common subset: " + p);
    auto err = match::check_pattern(p, vs);
    if (!err.empty()) add(err + ": " + p);
  };
  for (const auto& p : s.fingerprints) check(p, true);
  for (const auto& p : s.extract) {
    check(p, false);
    re2::StringPiece in(p);
    std::string g;
    while (re2::RE2::FindAndConsume(&in, group_re, &g)) groups.insert(g);
  }
  const table* lt = nullptr;
  if (!s.lookup_table.empty()) {
    auto t = lib.tables.find(s.lookup_table);
    if (t == lib.tables.end()) add("lookup table '" + s.lookup_table + "' is not in _tables/");
    else lt = &t->second;
    // An inferred entry's fields come from the findings its rule rests on, not from its own patterns.
    if (!groups.count(s.lookup_field) && s.inferred_by.empty()) add("lookup field '" + s.lookup_field + "' is not an extract group");
    if (lt && lt->has_column("kind"))
      for (const auto& [key, cells] : lt->rows) {
        auto k2 = lt->get(key, "kind");
        if (!k2.empty() && !lib.kind(k2)) add("table " + lt->name + " row " + key + ": kind '" + k2 + "' is not in kinds.tsv");
      }
  }
  static const re2::RE2 placeholder_any(R"(\{([\w.]+)\})");
  auto check_placeholders = [&](const std::string& tpl) {
    re2::StringPiece in(tpl);
    std::string ph;
    while (re2::RE2::FindAndConsume(&in, placeholder_any, &ph)) {
      if (ph.rfind("lookup.", 0) == 0) {
        if (!lt) add("placeholder {" + ph + "} needs a lookup table");
        else if (!lt->has_column(ph.substr(7))) add("placeholder {" + ph + "}: table " + lt->name + " has no such column");
      } else if (!groups.count(ph) && ph != "rank" && ph != "host" && ph != "ts" && s.inferred_by.empty()) {
        add("placeholder {" + ph + "} is not an extract group or built-in");
      }
    }
  };
  check_placeholders(s.root_cause);
}

}  // namespace

std::vector<lint_issue> lint(const library& lib) {
  std::vector<lint_issue> out;
  std::set<std::string> ids, names;
  static const re2::RE2 uuid_re("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  for (const auto& s : lib.signatures) {
    auto add = [&](const std::string& m) { out.push_back({s.file, s.name, m}); };
    lint_layout(s, add);
    lint_env_vars(lib, s, add);
    lint_verify(lib, s, add);
    lint_root_cause_sentence(s, add);
    if (auto area = check_area(lib, s); !area.empty()) add(area);
    if (!re2::RE2::FullMatch(s.id, uuid_re)) add("id is not a UUIDv4");
    if (!ids.insert(s.id).second) add("duplicate id " + s.id);
    if (!names.insert(s.name).second) add("duplicate name");
    lint_values(lib, s, add);
    lint_patterns(lib, s, add);
  }
  for (auto& i : lint_macros(lib)) out.push_back(std::move(i));
  for (auto& i : lint_vocabulary(lib)) out.push_back(std::move(i));
  return out;
}

std::vector<lint_issue> lint_vocabulary(const library& lib) {
  static const std::set<std::string> kCaseless = {"secret_keys", "error_words"};
  std::vector<lint_issue> out;
  re2::RE2::Options o;
  o.set_log_errors(false);
  for (const auto& table_entry : lib.tables) {
    const auto& name = table_entry.first;
    const auto& t = table_entry.second;  // not a structured binding: clang 14 cannot capture one in a lambda
    if (!t.has_column("sample") || (!t.has_column("word") && !t.has_column("regex"))) continue;
    const std::string file = "_tables/" + name + ".tsv";
    for (const auto& row : t.rows) {
      const auto& key = row.first;
      auto cell = [&](const char* c) { return t.get(key, c); };
      auto add = [&](const std::string& m) { out.push_back({file, key, m}); };
      const std::string sample = cell("sample");
      if (t.has_column("source") && cell("source").empty()) add("no source (where the word or format is documented)");
      if (sample.empty()) {
        add("no sample");
        continue;
      }
      if (t.has_column("regex")) {
        re2::RE2::Options ro = o;  // the tables whose stage reads each regex case-insensitively (see their headers)
        ro.set_case_sensitive(!kCaseless.count(name));
        re2::RE2 re(cell("regex"), ro);
        if (!re.ok()) add("the regex does not compile in RE2: " + re.error());
        else if (!re2::RE2::PartialMatch(sample, re)) add("the regex does not match the sample: " + sample);
      }
      if (!t.has_column("word")) continue;
      const std::string word = cell("word");
      re2::RE2 at_start("(?i)(?:^|[^A-Za-z])" + re2::RE2::QuoteMeta(word), o);
      if (!re2::RE2::PartialMatch(sample, at_start)) add("the sample does not hold the word at a word start: " + sample);
      if (name == "host_words") {  // the sample, read the way its first use marked yes reads it
        if (cell("path") == "yes") {
          if (!ingest::hints_from_path(sample).host) add("path: the sample is not read as a host (ingest::hints_from_path): " + sample);
        } else if (cell("prefix") == "yes") {
          if (!mask::prefix_host_form(sample, true)) add("prefix: no console-prefix host rule matches the sample: " + sample);
        }
      }
    }
  }
  return out;
}

// Shared definitions (kb/_macros): a signature that spells out a list's patterns or a macro's text instead
// of naming it is copy-paste waiting to drift; a definition no signature uses is dead.
std::vector<lint_issue> lint_macros(const library& lib) {
  std::vector<lint_issue> out;
  std::set<std::string> used;
  for (const auto& s : lib.signatures) used.insert(s.macros_used.begin(), s.macros_used.end());
  for (const auto& s : lib.signatures) {
    auto uses = [&](const std::string& n) { return std::find(s.macros_used.begin(), s.macros_used.end(), n) != s.macros_used.end(); };
    for (const auto& [name, items] : lib.macros.lists) {
      if (items.empty() || uses("@" + name)) continue;
      bool all = std::all_of(items.begin(), items.end(),
                             [&](const std::string& p) { return std::find(s.extract.begin(), s.extract.end(), p) != s.extract.end(); });
      if (all) out.push_back({s.file, s.name, "extract repeats the patterns of list " + name + ": write '@" + name + "' (kb/_macros)"});
    }
    for (const auto& macro : lib.macros.macros) {  // not a structured binding: clang 14 cannot capture one
      const std::string& name = macro.first;
      const std::string& text = macro.second;
      if (text.size() < 8 || uses("%{" + name + "}")) continue;  // a short macro can be part of other text by chance
      for (const auto* list : {&s.fingerprints, &s.extract})
        if (std::any_of(list->begin(), list->end(), [&](const std::string& p) { return p.find(text) != std::string::npos; })) {
          out.push_back({s.file, s.name, "a pattern spells out macro " + name + ": write %{" + name + "} (kb/_macros)"});
          break;
        }
    }
  }
  for (const auto& [name, _] : lib.macros.macros)
    if (!used.count("%{" + name + "}")) out.push_back({"kb/_macros", name, "macro defined but no signature uses it"});
  for (const auto& [name, _] : lib.macros.lists)
    if (!used.count("@" + name)) out.push_back({"kb/_macros", name, "list defined but no signature uses it"});
  return out;
}

std::vector<lint_issue> lint_inferred(const library& lib, const std::vector<std::string>& produced) {
  std::vector<lint_issue> out;
  std::set<std::string> made(produced.begin(), produced.end());
  for (const auto& p : made)
    if (std::none_of(lib.signatures.begin(), lib.signatures.end(), [&](const signature& s) { return s.inferred_by == p; }))
      out.push_back({"(correlator)", p, "a correlation rule produces '" + p + "' but no signature has inferred_by: " + p});
  for (const auto& s : lib.signatures)
    if (!s.inferred_by.empty() && !made.count(s.inferred_by))
      out.push_back({s.file, s.name, "inferred_by '" + s.inferred_by + "' names no correlation rule output"});
  return out;
}

std::vector<example_failure> test_examples(const library& lib) {
  std::vector<example_failure> out;
  auto m = match::matcher::compile(lib);
  if (!m) {
    out.push_back({"(library)", m.error().message});
    return out;
  }
  match::scratch s(m.value());
  std::vector<match::hit> hits;
  for (std::size_t i = 0; i < lib.signatures.size(); ++i) {
    const auto& sig = lib.signatures[i];
    if (!sig.inferred_by.empty()) continue;
    for (const auto& ex : sig.positive) {
      hits.clear();
      if (auto st = m.value().scan(ex.line, s, hits); !st) {
        out.push_back({sig.name, st.error().message});
        continue;
      }
      auto it = std::find_if(hits.begin(), hits.end(), [&](const match::hit& h) { return h.signature == static_cast<int>(i); });
      if (it == hits.end()) {
        out.push_back({sig.name, "positive example does not match: " + ex.line});
        continue;
      }
      for (const auto& kv_expect : ex.expect) {
        const std::string& k = kv_expect.first;
        const std::string& v = kv_expect.second;
        auto f = std::find_if(it->captured.begin(), it->captured.end(), [&](auto& kv) { return kv.first == k; });
        std::string got = f == it->captured.end() ? "<none>" : f->second;
        if (got != v) out.push_back({sig.name, "expected " + k + "='" + v + "', got '" + got + "' in: " + ex.line});
      }
    }
    // Collisions (lnav's format collision check): another cause of a different kind that matches this
    // example and would win (priority >= ours) must be declared in `related`.
    if (sig.is_cause() && sig.priority > 10)  // a catch-all is generic by design
      for (const auto& ex : sig.positive) {
        hits.clear();
        if (auto st = m.value().scan(ex.line, s, hits); !st) {
          out.push_back({sig.name, st.error().message});
          continue;
        }
        for (const auto& h : hits) {
          const auto& o = lib.signatures[static_cast<std::size_t>(h.signature)];
          if (h.signature == static_cast<int>(i) || !o.is_cause() || o.kind == sig.kind || o.priority < sig.priority) continue;
          if (std::find(sig.related.begin(), sig.related.end(), o.name) != sig.related.end() ||
              std::find(o.related.begin(), o.related.end(), sig.name) != o.related.end())
            continue;
          out.push_back({sig.name, "example also matches " + o.name + " (" + o.kind + ", priority " +
                                       std::to_string(o.priority) + " >= " + std::to_string(sig.priority) +
                                       "), which would win; narrow one of them or declare it in related: " + ex.line});
        }
      }
    for (const auto& ex : sig.negative) {
      hits.clear();
      if (auto st = m.value().scan(ex.line, s, hits); !st) {
        out.push_back({sig.name, st.error().message});
        continue;
      }
      if (std::any_of(hits.begin(), hits.end(), [&](const match::hit& h) { return h.signature == static_cast<int>(i); }))
        out.push_back({sig.name, "negative example matches: " + ex.line});
    }
  }
  return out;
}

}  // namespace ff::kb
