// firstfault scan PATH... -o node.ffev: one node's share of a cluster diagnosis (events.hpp). The report
// comes from `firstfault diagnose --events` over every node's file.
#include <cstdlib>

#include "commands.hpp"
#include "common.hpp"
#include "firstfault/events.hpp"
#include "firstfault/pipeline.hpp"
#include "firstfault/report.hpp"

namespace ff::cli {
namespace {

class scan_command final : public command {
 public:
  scan_command(CLI::App& app, std::vector<std::string>& kb_dirs) {
    sub_ = app.add_subcommand("scan", "read one node's logs and write what the diagnosis needs to an events file (merge with diagnose --events)");
    auto* s = sub_;
    s->add_option("paths", paths_, "log files, directories, archives, or - for stdin")->required();
    s->add_option("--output,-o", out_, "events file to write (firstfault.events/v1: zstd-compressed JSON lines)")->required();
    s->add_option("--job-id", job_id_, "the job's id: every node derives the same mask key from it (default $SLURM_JOB_ID when no key is given)");
    s->add_option("--mask-key", key_, "mask key shared by every node of the job (see docs/cluster.md)");
    s->add_option("--mask-key-file", key_file_, "file whose first line is the site's mask key (per job when --job-id is given too; alone, tokens stay stable across jobs)");
    s->add_option("--journal", journal_dirs_, "a directory of systemd journal files (the node's /var/log/journal, or systemd-journal-remote's output) read with the logs (repeatable)")
        ->check(CLI::ExistingDirectory);
    s->add_option("--host", host_, "the node these logs were read on: the host of every input whose path names none (masked like any host)");
    s->add_option("--kb", kb_dirs, "extra directory of signature files (repeatable)")->check(CLI::ExistingDirectory);
    s->add_option("--max-line-kib", max_line_kib_, "cut lines longer than this (KiB, 1-1048576)")->check(CLI::Range(1, 1048576));
    s->add_flag("--no-mask", no_mask_, "do not mask addresses, host names, user names and secrets");
    s->add_option("--mask-rule", mask_rules_, "extra RE2 pattern to mask (repeatable; group 1 if present)");
    s->add_option("--mask-config", mask_config_, "team masking config (YAML: enabled, rules, keep_hosts)");
    s->add_flag("--quiet,-q", quiet_, "no per-input notes on stderr (the events file still lists them)");
  }
  bool parsed() const override { return sub_->parsed(); }
  int run(const kb::library& lib) override;

 private:
  CLI::App* sub_;
  std::vector<std::string> paths_, mask_rules_, journal_dirs_;
  std::string out_, host_, job_id_, key_, key_file_, mask_config_;
  std::size_t max_line_kib_ = 1024;
  bool no_mask_ = false, quiet_ = false;
};

int scan_command::run(const kb::library& lib) {
  auto mo = mask_options(mask_config_, mask_rules_, no_mask_);
  if (!mo) {
    print_error(mo.error().message);
    return kExitUsage;
  }
  // $SLURM_JOB_ID only when no key is given: a site key alone keeps tokens stable across jobs (lemon-node
  // statistics in a shared history), with --job-id they change per job (docs/cluster.md).
  if (job_id_.empty() && key_.empty() && key_file_.empty())
    if (const char* j = std::getenv("SLURM_JOB_ID"); j && *j) job_id_ = j;
  auto key = mask_key(key_, key_file_, job_id_);
  if (!key) {
    print_error(key.error().message);
    return kExitUsage;
  }
  // Without a shared key every node would number its hosts from node-1, and the merge could not tell them apart.
  if (mo.value().enabled && key.value().empty()) {
    print_error("scan: masking needs a key every node shares: give --job-id ID (or run under Slurm: $SLURM_JOB_ID), --mask-key or --mask-key-file, or --no-mask");
    return kExitUsage;
  }
  pipeline::options opt;
  opt.ingest.max_line_bytes = max_line_kib_ << 10;
  opt.ingest.journal_dirs = journal_dirs_;
  opt.mask = mo.value();
  opt.mask.key = key.value();
  opt.default_host = host_;
  auto eng = pipeline::engine::build(lib);
  if (!eng) {
    print_error(eng.error().message);
    return exit_status(eng.error());
  }
  auto s = pipeline::scan(paths_, eng.value(), opt);
  if (!s) {
    print_error(s.error().message);
    return exit_status(s.error());
  }
  if (!quiet_)
    for (const auto& n : report::note_lines(s.value().errors)) print_error(n);
  if (auto st = events::write(out_, s.value(), lib, opt.mask.enabled ? opt.mask.key : std::string()); !st) {
    print_error(st.error().message);
    return kExitUsage;
  }
  if (!s.value().any_readable) {
    print_error("nothing readable in the inputs (the events file says so)");
    return 1;
  }
  return 0;
}

}  // namespace

std::unique_ptr<command> add_scan(CLI::App& app, std::vector<std::string>& kb_dirs) { return std::make_unique<scan_command>(app, kb_dirs); }

}  // namespace ff::cli
