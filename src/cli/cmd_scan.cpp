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
    s->add_option("--job-id", job_id_, "with --redact: the job's id, from which every node derives the same mask key (default $SLURM_JOB_ID when no key is given)");
    s->add_option("--mask-key", key_, "--redact with a mask key shared by every node of the job (see docs/cluster.md)");
    s->add_option("--mask-key-file", key_file_, "--redact with the site's mask key, the file's first line (per job when --job-id is given too; alone, tokens stay stable across jobs)");
    s->add_flag("--redact", redact_, "mask host names, addresses, MACs and user names too, with keyed pseudonyms every node shares (--job-id, --mask-key, --mask-key-file; else the per-user key)");
    s->add_option("--journal", journal_dirs_, "a directory of systemd journal files (the node's /var/log/journal, or systemd-journal-remote's output) read with the logs (repeatable)")
        ->check(CLI::ExistingDirectory);
    s->add_option("--host", host_, "the node these logs were read on: the host of every input whose path names none (masked like any host)");
    s->add_option("--kb", kb_dirs, "extra directory of signature files (repeatable)")->check(CLI::ExistingDirectory);
    s->add_option("--max-line-kib", max_line_kib_, "cut lines longer than this (KiB, 1-1048576)")->check(CLI::Range(1, 1048576));
    s->add_flag("--no-mask", no_mask_, "do not mask secrets and e-mail addresses (host names and addresses are shown unless --redact)");
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
  bool no_mask_ = false, quiet_ = false, redact_ = false;
};

int scan_command::run(const kb::library& lib) {
  // A key given is a request for keyed pseudonyms: it implies --redact (a job id alone does not: under
  // Slurm $SLURM_JOB_ID is always set, and hosts are shown by default, as diagnose shows them).
  const bool key_given = !key_.empty() || !key_file_.empty();
  auto mo = mask_options(mask_config_, mask_rules_, no_mask_, redact_ || key_given);
  if (!mo) {
    print_error(mo.error().message);
    return kExitUsage;
  }
  std::string mask_key_used;
  if (mo.value().enabled && mo.value().redact) {
    // $SLURM_JOB_ID only when no key is given: a site key alone keeps tokens stable across jobs (lemon-node
    // statistics in a shared history), with --job-id they change per job (docs/cluster.md).
    if (job_id_.empty() && !key_given)
      if (const char* j = std::getenv("SLURM_JOB_ID"); j && *j) job_id_ = j;
    // Without a key or a job id: the per-user key (the same on every node that shares the home directory;
    // the merge refuses files made with different keys).
    auto key = key_given || !job_id_.empty() ? mask_key(key_, key_file_, job_id_) : user_redact_key();
    if (!key) {
      print_error(key.error().message);
      return kExitUsage;
    }
    mask_key_used = key.value();
  }
  pipeline::options opt;
  opt.ingest.max_line_bytes = max_line_kib_ << 10;
  opt.ingest.journal_dirs = journal_dirs_;
  opt.mask = mo.value();
  opt.mask.key = mask_key_used;
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
  if (auto st = events::write(out_, s.value(), lib, opt.mask.enabled && opt.mask.redact ? opt.mask.key : std::string()); !st) {
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
