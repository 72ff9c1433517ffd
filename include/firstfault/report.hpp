// firstfault/report.hpp: renderers. Pure functions of the diagnosis (and the run's input list);
// only src/cli writes to stdout.
//
//   std::string s = ff::report::to_terminal(run, {.color = isatty(1) && !getenv("NO_COLOR")});
//   nlohmann::json j = ff::report::to_json(run);     // "schema": "firstfault.report/v1"
//   std::string md = ff::report::to_markdown(run);
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "firstfault/pipeline.hpp"

namespace ff::report {

struct terminal_style {
  bool color = false;
  int max_collateral = 12;
  std::size_t max_ranks = 8;  ///< rank stories listed under RANKS (the first failing rank, those with errors, the first to stop)
};

std::string to_terminal(const pipeline::run& r, const terminal_style& style);
nlohmann::json to_json(const pipeline::run& r);
std::string to_markdown(const pipeline::run& r);
/// A self-contained HTML page (inline CSS and SVG, no script, no external asset; every log text escaped):
/// the verdict, the first failing rank and host, the per-rank timeline (timeline.hpp), evidence, collateral,
/// fix, verify and confirm, the lines that look wrong and the input notes.
std::string to_html(const pipeline::run& r);
struct html_options {
  std::string nonce;   ///< CSP nonce for the <style> element (firstfault serve); empty: none
  std::string header;  ///< trusted HTML put before the report (the web page's navigation)
  /// A link for "file:line" (the web page's log viewer); empty or unset: plain text.
  std::function<std::string(const std::string& source, std::uint64_t line_no)> line_link;
};
std::string to_html(const pipeline::run& r, const html_options& opt);
/// The report part of to_html (no <html>, <head> or <style>), for pages that have their own.
std::string to_html_body(const pipeline::run& r, const html_options& opt);
/// The stylesheet to_html inlines.
const std::string& html_css();


/// The notes about inputs, one line each ("path: reason"), with a reason shared by many inputs shown for
/// the first `keep` of them and then once as "N more input(s): reason" (300 empty stdout.log files).
/// The RESTARTS block of the text report: one entry per torchrun attempt with its cause, rank and first line
/// (empty when the inputs hold one attempt).
std::vector<std::string> attempt_lines(const correlate::diagnosis& d);
std::vector<std::string> note_lines(const std::vector<ingest::input_error>& errors, std::size_t keep = 3);

/// A stored report (to_json's output, as `history show` finds it) as terminal text: verdict, first
/// failing rank and host, what decided, root cause, evidence, fix and verify.
std::string from_stored_json(const nlohmann::json& j);

/// One line for epilogs and tickets: `failure kind=cuda_oom rank=2 host=<host-1> action=stop-fix-config CUDA out
/// of memory`, `undetermined rank=- host=- action=investigate ...`, or `healthy 1200 lines from 3 input(s)`;
/// absent fields are "-"; the action's hosts follow a colon, comma-separated (`action=restart-excluding-hosts:n7`).
std::string to_brief(const pipeline::run& r);

/// Exit status for a run: 0 healthy, 1 failure, 3 undetermined, 2 nothing readable.
int exit_code(const pipeline::run& r);
/// Exit status by action (`diagnose --exit-code action`): action::exit_status() of the run's action
/// (0 none, 10 restart ... 15 investigate), 2 nothing readable.
int action_exit_code(const pipeline::run& r);

}  // namespace ff::report
