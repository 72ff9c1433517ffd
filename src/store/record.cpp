// history::entry_of and the history list helpers (record.hpp).
#include "firstfault/record.hpp"

#include <ctime>

#include "firstfault/report.hpp"

namespace ff::history {

entry entry_of(const pipeline::run& r, std::string source, std::string report_json) {
  entry e;
  e.source = std::move(source);
  for (const auto& i : r.inputs) e.inputs += (e.inputs.empty() ? "" : "; ") + i.path;
  e.verdict = correlate::to_string(r.diag.verdict);
  e.signature = r.diag.signature;
  e.kind = r.diag.kind;
  e.initiating_rank = r.diag.initiating_rank;
  e.initiating_host = r.diag.initiating_host.value_or("");
  e.host_key = r.initiating_host_key;
  e.action = action::to_string(r.action.what);
  for (const auto& h : r.action.hosts) e.action_hosts += (e.action_hosts.empty() ? "" : ",") + h;
  e.report_json = report_json.empty()
                      ? report::to_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                      : std::move(report_json);
  return e;
}

std::string format_utc(std::int64_t unix_seconds) {
  std::time_t tt = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%SZ", &tm);
  return b;
}

std::string summarize_inputs(const std::string& inputs, std::size_t max_chars) {
  static constexpr std::string_view kSep = "; ";
  std::string first = inputs.substr(0, inputs.find(kSep));
  std::size_t more = 0;
  for (std::size_t p = inputs.find(kSep); p != std::string::npos; p = inputs.find(kSep, p + kSep.size())) ++more;
  if (max_chars > 3 && first.size() > max_chars) first = "..." + first.substr(first.size() - (max_chars - 3));
  if (more) first += " (+" + std::to_string(more) + " more)";
  return first;
}

}  // namespace ff::history
