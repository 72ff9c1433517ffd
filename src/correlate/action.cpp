// The action rule table (kb/_tables/actions.tsv) read and applied: include/firstfault/action.hpp.
#include "firstfault/action.hpp"

#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <utility>

namespace ff::action {
namespace {

constexpr std::array<std::pair<kind, std::string_view>, 7> kNames{{
    {kind::none, "none"},
    {kind::restart, "restart"},
    {kind::restart_excluding_hosts, "restart-excluding-hosts"},
    {kind::stop_fix_code, "stop-fix-code"},
    {kind::stop_fix_config, "stop-fix-config"},
    {kind::stop_fix_data, "stop-fix-data"},
    {kind::investigate, "investigate"},
}};

constexpr std::string_view kTable = "actions";
constexpr std::string_view kUndetermined = "undetermined";

// One row of the table, its cells parsed.
struct rule_row {
  std::string name, kind_name, when, hosts, why, source;
  std::optional<kind> what;
};

std::vector<rule_row> rows_of(const kb::table& t) {
  std::vector<rule_row> out;
  for (const auto& key : t.order) {
    rule_row r;
    r.name = key;
    r.kind_name = t.get(key, "kind");
    r.when = t.get(key, "when");
    r.hosts = t.get(key, "hosts");
    r.why = t.get(key, "why");
    r.source = t.get(key, "source");
    r.what = parse_kind(t.get(key, "action"));
    out.push_back(std::move(r));
  }
  return out;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// A finding that speaks of the hardware: its kind's category is hardware, or it is a host-area signature
// (kernel and driver messages) tagged hardware.* (a NIC link down, an mlx5 health event, a PCIe AER).
bool hardware_finding(const kb::library& lib, const std::string& signature, const std::string& kind) {
  if (const auto* k = lib.kind(kind); k && k->category == "hardware") return true;
  const auto* s = lib.find(signature);
  if (!s || !starts_with(s->name, "host_")) return false;
  return std::any_of(s->tags.begin(), s->tags.end(), [](const std::string& t) { return starts_with(t, "hardware."); });
}

// The hosts of the hardware findings (root cause first), each once; empty when none names a host.
std::vector<std::string> hardware_hosts(const correlate::diagnosis& d, const kb::library& lib, bool& any) {
  std::vector<std::string> hosts;
  auto add = [&hosts](const std::optional<std::string>& h) {
    if (h && !h->empty() && std::find(hosts.begin(), hosts.end(), *h) == hosts.end()) hosts.push_back(*h);
  };
  any = false;
  if (!d.signature.empty() && hardware_finding(lib, d.signature, d.kind)) {
    any = true;
    add(d.initiating_host);
    for (const auto& e : d.evidence_lines) add(e.host);
  }
  for (const auto& g : d.collateral)
    if (hardware_finding(lib, g.signature, g.kind)) any = true, add(g.example.host);
  for (const auto& a : d.alternatives)
    if (hardware_finding(lib, a.signature, a.kind)) any = true, add(a.example.host);
  return hosts;
}

bool text_matches(const correlate::diagnosis& d, const re2::RE2& re) {
  if (re2::RE2::PartialMatch(d.summary, re) || re2::RE2::PartialMatch(d.title, re)) return true;
  for (const auto& f : d.facts)
    if (re2::RE2::PartialMatch(f, re)) return true;
  for (const auto& e : d.evidence_lines)
    if (re2::RE2::PartialMatch(e.text, re)) return true;
  return false;
}

bool condition_holds(const rule_row& r, const correlate::diagnosis& d, std::optional<std::int64_t> recurrences,
                     const kb::library& lib) {
  if (r.when == "always") return true;
  if (r.when == "recurred") return recurrences && *recurrences > 0;
  if (r.when == "hardware") {
    bool any = false;
    hardware_hosts(d, lib, any);
    return any;
  }
  if (starts_with(r.when, "signature:")) return d.signature == r.when.substr(10);
  if (starts_with(r.when, "text:")) {
    re2::RE2 re(r.when.substr(5), re2::RE2::Quiet);
    return re.ok() && text_matches(d, re);
  }
  return false;
}

action from_row(const rule_row& r, const correlate::diagnosis& d, const kb::library& lib) {
  action a;
  a.what = r.what.value_or(kind::investigate);
  a.rule = r.name;
  a.source = r.source;
  a.why = r.why;
  if (r.hosts == "first" && d.initiating_host && !d.initiating_host->empty()) a.hosts.push_back(*d.initiating_host);
  if (r.hosts == "hardware") {
    bool any = false;
    a.hosts = hardware_hosts(d, lib, any);
    if (a.hosts.empty() && d.initiating_host && !d.initiating_host->empty()) a.hosts.push_back(*d.initiating_host);
  }
  if (a.what == kind::restart_excluding_hosts && a.hosts.empty()) {
    a.what = kind::investigate;
    a.why += " No host is named in these logs, so the node to leave out is not known: find it (the scheduler's "
             "node list for the job) before restarting.";
  }
  if (a.what != kind::restart_excluding_hosts) a.hosts.clear();
  a.retryable = a.what == kind::restart || a.what == kind::restart_excluding_hosts;
  return a;
}

}  // namespace

std::string_view to_string(kind k) {
  for (const auto& [v, n] : kNames)
    if (v == k) return n;
  return "investigate";
}

std::optional<kind> parse_kind(std::string_view text) {
  for (const auto& [v, n] : kNames)
    if (n == text) return v;
  return std::nullopt;
}

const std::vector<kind>& all_kinds() {
  static const std::vector<kind> all{kind::none,           kind::restart,         kind::restart_excluding_hosts, kind::stop_fix_code,
                                     kind::stop_fix_config, kind::stop_fix_data, kind::investigate};
  return all;
}

int exit_status(kind k) {
  switch (k) {
    case kind::none: return 0;
    case kind::restart: return 10;
    case kind::restart_excluding_hosts: return 11;
    case kind::stop_fix_code: return 12;
    case kind::stop_fix_config: return 13;
    case kind::stop_fix_data: return 14;
    case kind::investigate: return 15;
  }
  return 15;
}

action decide(const correlate::diagnosis& d, std::optional<std::int64_t> recurrences, const kb::library& lib) {
  std::string key = d.verdict == correlate::verdict::healthy        ? std::string("healthy")
                    : d.verdict == correlate::verdict::undetermined ? std::string(kUndetermined)
                                                                    : d.kind;
  auto t = lib.tables.find(std::string(kTable));
  if (t != lib.tables.end())
    for (const auto& r : rows_of(t->second))
      if (r.kind_name == key && condition_holds(r, d, recurrences, lib)) return from_row(r, d, lib);
  action a;
  a.what = d.verdict == correlate::verdict::healthy ? kind::none : kind::investigate;
  a.why = "The knowledge base has no action rule for kind '" + key + "'.";
  return a;
}

std::vector<table_issue> lint(const kb::library& lib) {
  std::vector<table_issue> out;
  const std::string file = "_tables/actions.tsv";
  auto t = lib.tables.find(std::string(kTable));
  if (t == lib.tables.end()) return {{file, "", "the action rule table is missing"}};
  for (const char* col : {"rule", "kind", "when", "action", "hosts", "why", "source"})
    if (!t->second.has_column(col)) out.push_back({file, "", std::string("no column '") + col + "'"});
  if (!out.empty()) return out;
  std::map<std::string, int> defaults;
  std::set<std::string> closed;  // kinds whose `always` rule has been read: a later rule is unreachable
  for (const auto& r : rows_of(t->second)) {
    auto add = [&](const std::string& m) { out.push_back({file, r.name, m}); };
    if (r.kind_name != kUndetermined && !lib.kind(r.kind_name)) add("kind '" + r.kind_name + "' is not in kinds.tsv");
    if (!r.what) add("action '" + t->second.get(r.name, "action") + "' is not one of the seven");
    if (r.hosts != "-" && r.hosts != "first" && r.hosts != "hardware") add("hosts '" + r.hosts + "' is not -, first or hardware");
    if (r.what == kind::restart_excluding_hosts && r.hosts == "-") add("restart-excluding-hosts names no hosts");
    if (r.what && r.what != kind::restart_excluding_hosts && r.hosts != "-") add("hosts are named only to be excluded");
    if (closed.count(r.kind_name)) add("comes after the kind's `always` rule, so it is never tried");
    if (r.when == "always") {
      ++defaults[r.kind_name];
      closed.insert(r.kind_name);
      if (r.name != r.kind_name) add("a kind's default rule is named as the kind");
    } else if (starts_with(r.when, "signature:")) {
      if (!lib.find(r.when.substr(10))) add("no signature " + r.when.substr(10));
    } else if (starts_with(r.when, "text:")) {
      re2::RE2 re(r.when.substr(5), re2::RE2::Quiet);
      if (!re.ok()) add("text pattern does not compile: " + re.error());
    } else if (r.when != "recurred" && r.when != "hardware") {
      add("when '" + r.when + "' is not always, recurred, hardware, signature:NAME or text:RE2");
    }
    if (r.why.empty()) add("no why");
    if (!starts_with(r.source, "https://")) add("source is not an https URL");
  }
  std::vector<std::string> kinds{std::string(kUndetermined)};
  for (const auto& k : lib.kinds) kinds.push_back(k.kind);
  for (const auto& k : kinds)
    if (defaults[k] != 1) out.push_back({file, k, "kind needs exactly one `always` action rule, has " + std::to_string(defaults[k])});
  return out;
}

std::vector<std::string> excluding(const std::vector<std::string>& cmd, const std::string& tmpl, const std::vector<std::string>& hosts) {
  if (hosts.empty() || cmd.empty()) return cmd;
  std::string joined;
  for (const auto& h : hosts) joined += (joined.empty() ? "" : ",") + h;
  std::vector<std::string> words;
  for (std::size_t at = 0; at < tmpl.size();) {
    auto end = tmpl.find(' ', at);
    if (end == std::string::npos) end = tmpl.size();
    if (end > at) {
      std::string w = tmpl.substr(at, end - at);
      for (auto p = w.find("{hosts}"); p != std::string::npos; p = w.find("{hosts}", p + joined.size())) w.replace(p, 7, joined);
      words.push_back(std::move(w));
    }
    at = end + 1;
  }
  if (words.empty()) return cmd;
  std::vector<std::string> out = cmd;
  auto same_program = [&words](const std::string& w) {  // "srun" is also /usr/bin/srun
    auto slash = w.rfind('/');
    return w == words.front() || (slash != std::string::npos && w.compare(slash + 1, std::string::npos, words.front()) == 0);
  };
  auto anchor = std::find_if(out.begin(), out.end(), same_program);
  if (anchor != out.end() && words.size() > 1) {
    out.insert(anchor + 1, words.begin() + 1, words.end());
  } else {
    out.insert(out.begin() + 1, words.begin(), words.end());
  }
  return out;
}

std::string table_markdown(const kb::library& lib) {
  std::string o = "| kind | when | action | hosts | why | source |\n|---|---|---|---|---|---|\n";
  auto t = lib.tables.find(std::string(kTable));
  if (t == lib.tables.end()) return o;
  auto cell = [](std::string s) {
    std::string e;
    for (char c : s) e += c == '|' ? std::string("\\|") : std::string(1, c);
    return e;
  };
  for (const auto& r : rows_of(t->second))
    o += "| `" + r.kind_name + "` | " + (r.when == "always" ? std::string("always") : "`" + cell(r.when) + "`") + " | " +
         (r.what ? std::string(to_string(*r.what)) : std::string("?")) + " | " + r.hosts + " | " + cell(r.why) + " | " + r.source + " |\n";
  return o;
}

}  // namespace ff::action
