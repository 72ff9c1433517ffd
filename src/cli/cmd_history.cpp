// firstfault history list|show|stats: what the local history holds.
#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "common.hpp"
#include "firstfault/record.hpp"
#include "firstfault/report.hpp"
#include "firstfault/text.hpp"

namespace ff::cli {
namespace {

// JSON of stored rows for a terminal: non-ASCII as \u escapes (a bidi control cannot reorder the output) and
// invalid UTF-8 replaced (a row need not be valid UTF-8).
std::string dump_safe(const nlohmann::json& j) { return j.dump(2, ' ', true, nlohmann::json::error_handler_t::replace); }

class history_command final : public command {
 public:
  explicit history_command(CLI::App& app) {
    sub_ = app.add_subcommand("history", "list, show and count stored diagnoses");
    sub_->require_subcommand(1);
    const char* path_help = "history database (default $XDG_DATA_HOME/firstfault/history.db)";
    sub_->add_option("--history", path_, path_help);
    list_ = sub_->add_subcommand("list", "most recent diagnoses");
    list_->add_option("--limit", limit_, "how many");
    list_->add_option("--format", list_format_, "text | json")->check(CLI::IsMember({"text", "json"}));
    show_ = sub_->add_subcommand("show", "the stored report of one diagnosis");
    show_->add_option("id", id_)->required();
    show_->add_option("--format", show_format_, "text | json")->check(CLI::IsMember({"text", "json"}));
    stats_ = sub_->add_subcommand("stats", "failures counted by signature, kind or host");
    stats_->add_option("--by", by_, "signature | kind | host")->check(CLI::IsMember({"signature", "kind", "host"}));
    stats_->add_option("--days", days_, "window in days");
    for (auto* c : {list_, show_, stats_})  // also after the subcommand: history list --history PATH
      c->add_option("--history", path_, path_help);
  }
  bool parsed() const override { return sub_->parsed(); }
  int run(const kb::library&) override {
    auto h = history::store::open(path_.empty() ? history::default_path() : path_);
    if (!h) {
      print_error(h.error().message);
      return kExitUsage;
    }
    if (list_->parsed()) return list(h.value());
    if (show_->parsed()) return show(h.value());
    return stats(h.value());
  }

 private:
  int list(const history::store& hs) const;
  int show(const history::store& hs) const;
  int stats(const history::store& hs) const;

  CLI::App *sub_, *list_, *show_, *stats_;
  std::string path_, list_format_ = "text", show_format_ = "text", by_ = "signature";
  int limit_ = 20, days_ = 7;
  std::int64_t id_ = 0;
};

int history_command::list(const history::store& hs) const {
  auto rows = hs.list(limit_);
  if (!rows) {
    print_error(rows.error().message);
    return kExitUsage;
  }
  // Rows are untrusted (another user or tool may have written the database): every stored text is shown
  // through text::sanitize (escape sequences and controls removed, bidi controls shown as <U+202E>), and the
  // JSON is ASCII-only (\u escapes), as every other output is.
  if (list_format_ == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& e : rows.value())
      j.push_back({{"id", e.id}, {"created_at", e.created_at}, {"source", e.source}, {"inputs", e.inputs},
                   {"verdict", e.verdict}, {"signature", e.signature}, {"kind", e.kind},
                   {"initiating_rank", e.initiating_rank ? nlohmann::json(*e.initiating_rank) : nlohmann::json(nullptr)},
                   {"initiating_host", e.initiating_host}, {"action", e.action}, {"action_hosts", e.action_hosts}});
    std::cout << dump_safe(j) << "\n";
    return 0;
  }
  auto shown = [](const std::string& v) { return v.empty() ? std::string("-") : text::sanitize(v); };
  std::printf("%-5s %-20s  %-12s %-30s %-6s %-12s %-23s %s\n", "ID", "WHEN (UTC)", "VERDICT", "KIND", "RANK", "HOST", "ACTION", "INPUTS");
  for (const auto& e : rows.value())  // inputs: the first path and how many more (the full list: --format json)
    std::printf("%-5lld %-20s  %-12s %-30s %-6s %-12s %-23s %s\n", static_cast<long long>(e.id),
                text::sanitize(history::format_utc(e.created_at)).c_str(), shown(e.verdict).c_str(), shown(e.kind).c_str(),
                e.initiating_rank ? std::to_string(*e.initiating_rank).c_str() : "-", shown(e.initiating_host).c_str(),
                shown(e.action).c_str(), text::sanitize(history::summarize_inputs(e.inputs)).c_str());
  if (rows.value().empty()) std::printf("(no diagnoses stored yet)\n");
  return 0;
}

int history_command::show(const history::store& hs) const {
  auto e = hs.get(id_);
  if (!e) {
    print_error(e.error().message);
    return kExitUsage;
  }
  if (!e.value()) {
    print_error("no diagnosis with id " + std::to_string(id_));
    return kExitUsage;
  }
  auto j = nlohmann::json::parse(e.value()->report_json, nullptr, false);
  if (show_format_ == "json") std::cout << dump_safe(j) << "\n";
  else  // from_stored_json sanitises every text it prints from the stored report
    std::cout << "diagnosis " << id_ << " of " << text::sanitize(history::format_utc(e.value()->created_at)) << "\n\n"
              << report::from_stored_json(j);
  return 0;
}

int history_command::stats(const history::store& hs) const {
  auto rows = hs.stats(by_, days_);
  if (!rows) {
    print_error(rows.error().message);
    return kExitUsage;
  }
  std::printf("failures in the last %d days by %s:\n", days_, by_.c_str());
  for (const auto& c : rows.value()) std::printf("  %5lld  %s\n", static_cast<long long>(c.count), text::sanitize(c.key).c_str());
  if (rows.value().empty()) std::printf("  (none%s)\n", by_ == "host" ? ": no stored failure named its first failing host" : "");
  return 0;
}

}  // namespace

std::unique_ptr<command> add_history(CLI::App& app) { return std::make_unique<history_command>(app); }

}  // namespace ff::cli
