// firstfault/report.hpp: renderers. Pure functions of the diagnosis (and the run's input list);
// only src/cli writes to stdout.
//
//   std::string s = ff::report::to_terminal(run, {.color = isatty(1) && !getenv("NO_COLOR")});
//   nlohmann::json j = ff::report::to_json(run);     // "schema": "firstfault.report/v1"
//   std::string md = ff::report::to_markdown(run);
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "firstfault/pipeline.hpp"

namespace ff::report {

struct terminal_style {
  bool color = false;
  int max_collateral = 12;
};

std::string to_terminal(const pipeline::run& r, const terminal_style& style);
nlohmann::json to_json(const pipeline::run& r);
std::string to_markdown(const pipeline::run& r);
/// A self-contained HTML page (inline CSS, every log text escaped).
std::string to_html(const pipeline::run& r);

/// Exit status for a run: 0 healthy, 1 failure, 3 undetermined, 2 nothing readable.
int exit_code(const pipeline::run& r);

}  // namespace ff::report
