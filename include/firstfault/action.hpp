// firstfault/action.hpp: from a diagnosis to what to do next (restart, restart without a host, stop and fix).
//
// The decision is data: kb/_tables/actions.tsv holds one default rule per kind of kb/kinds.tsv (condition
// `always`), the exceptions of that kind above it, and rules for the pseudo-kinds `undetermined` and
// `healthy`. Rules of a kind are tried in file order; the first whose condition holds decides
// (docs/actions.md lists the table). Columns:
//   rule    unique name (the kind itself for the default rule, `kind.condition` for an exception)
//   kind    a kind of kinds.tsv, or `undetermined`
//   when    always | recurred (history::store::recurrences found the same kind on the same host) |
//           hardware (a finding of category hardware, or a host-area signature tagged hardware.*) |
//           signature:NAME (the root cause's signature) | text:RE2 (the root cause's summary, facts or
//           evidence lines match, unanchored)
//   action  restart | restart-excluding-hosts | stop-fix-code | stop-fix-config | stop-fix-data |
//           investigate | none
//   hosts   - (none) | first (the first failing host) | hardware (the hosts of the hardware findings,
//           else the first failing host)
//   why     one sentence for the report
//   source  the upstream page the rule rests on
//
//   auto a = ff::action::decide(run.diag, run.recurrences, lib);
//   if (a.what == ff::action::kind::restart_excluding_hosts) exclude(a.hosts);
//
// A restart-excluding-hosts rule that finds no host name in the logs becomes `investigate` (restarting on
// the same node would repeat the failure; the why says so). Hosts are the report's names: masked tokens
// with --redact.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "firstfault/correlate.hpp"
#include "firstfault/kb.hpp"

namespace ff::action {

enum class kind { none, restart, restart_excluding_hosts, stop_fix_code, stop_fix_config, stop_fix_data, investigate };

/// The spelling in reports, the table and scripts ("restart-excluding-hosts").
std::string_view to_string(kind k);
std::optional<kind> parse_kind(std::string_view text);
/// Every kind, in the order of `diagnose --exit-code action`'s statuses (docs/actions.md).
const std::vector<kind>& all_kinds();
/// The exit status of `diagnose --exit-code action`: none 0, restart 10, restart-excluding-hosts 11,
/// stop-fix-code 12, stop-fix-config 13, stop-fix-data 14, investigate 15 (2 stays "nothing readable").
int exit_status(kind k);

struct action {
  kind what = kind::none;
  std::vector<std::string> hosts;  ///< the hosts to leave out of the next attempt (restart-excluding-hosts only)
  bool retryable = false;          ///< restart or restart-excluding-hosts: running again may succeed
  std::string why;                 ///< the rule's sentence (and a note when the rule was downgraded)
  std::string rule;                ///< the table row that decided (its `rule` column); empty when none did
  std::string source;              ///< that row's upstream page
};

/// Decides the action for a diagnosis. `recurrences`: the same kind on the same host in the history
/// (pipeline::run::recurrences; nullopt or 0: none). Pure. Without an actions table, or with no row for
/// the kind, the answer is `investigate` with rule "" (kb lint reports the missing row).
action decide(const correlate::diagnosis& d, std::optional<std::int64_t> recurrences, const kb::library& lib);

/// One check of the table: every kind of kinds.tsv (and `undetermined`) has exactly one `always` rule,
/// placed after its exceptions; every cell parses (action, hosts, when, an RE2 that compiles, a
/// signature that exists); sources are https URLs. Part of kb::lint().
/// (The same fields as kb::lint_issue, which belongs to the kb_lint layer above this one: `kb lint` copies them.)
struct table_issue {
  std::string file, name, message;
};
std::vector<table_issue> lint(const kb::library& lib);

/// The command of the next attempt for `firstfault run --exclude-template`: `tmpl` split on spaces, each
/// "{hosts}" replaced by `hosts` joined with commas. When the template's first word is a word of `cmd`, or
/// the last part of a path in it (`srun --exclude={hosts}` for `srun -N4 python train.py` or for
/// `/usr/bin/srun ...`), its other words go right after that word;
/// otherwise all its words go right after the command's first word. Unchanged when `hosts` is empty.
std::vector<std::string> excluding(const std::vector<std::string>& cmd, const std::string& tmpl, const std::vector<std::string>& hosts);

/// The table as a Markdown table (docs/actions.md embeds it between markers; a test checks it is current).
std::string table_markdown(const kb::library& lib);

}  // namespace ff::action
