// firstfault diagnose PATH...: read the logs, print the report, store it in the history.
#include <unistd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <set>

#include "commands.hpp"
#include "common.hpp"
#include "firstfault/events.hpp"
#include "firstfault/pipeline.hpp"
#include "firstfault/record.hpp"
#include "firstfault/report.hpp"
#include "firstfault/text.hpp"
#include "firstfault/timeline.hpp"

namespace ff::cli {
namespace {

class diagnose_command final : public command {
 public:
  diagnose_command(CLI::App& app, std::vector<std::string>& kb_dirs) {
    sub_ = app.add_subcommand("diagnose", "name the root cause and first failing rank in job logs");
    auto* d = sub_;
    d->add_option("paths", paths_, "log files, directories, archives, or - for stdin (none with --journal: the journal alone)");
    d->add_option("--format,-f", format_, "text | json | markdown | html | brief | action (one line: the action and its hosts, for scheduler hooks)")
        ->check(CLI::IsMember({"text", "json", "markdown", "html", "brief", "action"}));
    d->add_flag("--brief", brief_, "one line: verdict, kind, first failing rank and host, title (same as --format brief)");
    d->add_option("--color", color_, "auto | always | never")->check(CLI::IsMember({"auto", "always", "never"}));
    d->add_option("--max-line-kib", max_line_kib_, "cut lines longer than this (KiB, 1-1048576)")->check(CLI::Range(1, 1048576));
    d->add_option("--journal", journal_dirs_, "a directory of systemd journal files (the node's /var/log/journal, or systemd-journal-remote's output) read with the logs (repeatable)")
        ->check(CLI::ExistingDirectory);
    d->add_option("--kb", kb_dirs, "extra directory of signature files (repeatable)")->check(CLI::ExistingDirectory);
    d->add_flag("--no-mask", no_mask_, "do not mask secrets and e-mail addresses (host names and addresses are shown unless --redact)");
    d->add_flag("--redact", redact_, "mask host names, addresses, MACs and user names too, with pseudonyms that stay the same across runs (keyed: --mask-key-file, else a per-user key)");
    d->add_flag("--quiet,-q", quiet_, "no progress line and no per-input notes on stderr (the report still lists them)");
    d->add_flag("--reveal", reveal_,
                "after the report, print the real host name behind each masked token (on this terminal only: never stored or sent)");
    d->add_flag("--exact", exact_,
                "read every line in full (reference mode; default: scan first, read in full only lines that can matter)");
    d->add_option("--threads,-j", threads_,
                  "1: read and match on one thread; 2: read and peel on one, the rest on another (the report is the same; "
                  "default: 2 on a machine with two cores or more)")
        ->check(CLI::Range(0u, 2u));
    d->add_option("--learn-lines", learn_lines_, "lines of each input read first to learn unknown prefixes (testing)")->group("");
    d->add_flag("--timeline", timeline_, "after the text report, a per-rank timeline: one row per rank or group of ranks, the root cause marked");
    d->add_option("--action-hosts", action_hosts_,
                  "the real names of the job's nodes (comma-separated or repeated): --format action names the hosts to "
                  "exclude by these names, a masked token mapped back through the mask key, and leaves out any host not "
                  "among them (a hook never acts on a node outside the job)")
        ->delimiter(',');
    d->add_option("--exit-code", exit_code_,
                  "verdict: 0 healthy, 1 failure, 3 undetermined, 2 nothing readable | action: 0 none, 10 restart, 11 "
                  "restart-excluding-hosts, 12 stop-fix-code, 13 stop-fix-config, 14 stop-fix-data, 15 investigate, 2 nothing "
                  "readable (docs/actions.md)")
        ->check(CLI::IsMember({"verdict", "action"}));
    d->add_flag("--no-history", no_history_, "do not store this diagnosis in the local history");
    d->add_option("--history", history_path_, "history database (default $XDG_DATA_HOME/firstfault/history.db)");
    d->add_option("--mask-rule", mask_rules_, "extra RE2 pattern to mask (repeatable; group 1 if present)");
    d->add_option("--mask-config", mask_config_, "team masking config (YAML: enabled, rules, keep_hosts)");
    d->add_flag("--events", events_, "the paths are events files written by `firstfault scan` (one per node): merge them in the order given and diagnose");
    d->add_option("--mask-key", key_, "--redact with keyed tokens (node-<hex>) as `scan --mask-key` does, so the report matches a merged one");
    d->add_option("--mask-key-file", key_file_, "--redact with the site's mask key, the file's first line (per job when --job-id is given too; alone, tokens stay stable across jobs)");
    d->add_option("--job-id", job_id_, "with --redact: make the mask key per job (as `scan --job-id`)");
  }
  bool parsed() const override { return sub_->parsed(); }
  int run(const kb::library& lib) override;

 private:
  void print_report(const pipeline::run& r) const;
  result<pipeline::run> from_events(const kb::library& lib, const pipeline::options& opt) const;
  void print_revealed(const pipeline::run& r) const;
  std::string action_line(const pipeline::run& r) const;

  CLI::App* sub_;
  std::vector<std::string> paths_, mask_rules_, journal_dirs_, action_hosts_;
  mask::options mask_;  // the run's masking, for --action-hosts
  std::string exit_code_ = "verdict";
  std::string format_ = "text", color_ = "auto", history_path_, mask_config_, key_, key_file_, job_id_;
  std::size_t max_line_kib_ = 1024, learn_lines_ = 256;
  unsigned threads_ = 0;
  bool redact_ = false, events_ = false, timeline_ = false, brief_ = false, no_mask_ = false, quiet_ = false, reveal_ = false, exact_ = false, no_history_ = false;
};

// A progress line on stderr when it is a terminal, once reading takes more than a second: bytes, inputs, rate.
// The diagnose command's sink (sink.hpp): only the run's progress.
class progress_line final : public pipeline::sink {
 public:
  explicit progress_line(bool on) : on_(on) {}
  bool progress(std::uint64_t bytes, std::size_t inputs) override {
    if (!on_) return true;
    auto now = std::chrono::steady_clock::now();
    double secs = std::chrono::duration<double>(now - started_).count();
    if (secs < 1.0 || now - last_drawn_ < std::chrono::milliseconds(250)) return true;
    last_drawn_ = now;
    drawn_ = true;
    std::fprintf(stderr, "\rfirstfault: read %.1f MB from %zu input(s), %.1f MB/s   ", static_cast<double>(bytes) / 1e6, inputs,
                 static_cast<double>(bytes) / 1e6 / secs);
    return true;
  }
  void clear() const {
    if (drawn_) std::fprintf(stderr, "\r\033[K");  // before anything else is printed
  }

 private:
  bool on_, drawn_ = false;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now(), last_drawn_ = started_;
};

int diagnose_command::run(const kb::library& lib) {
  if (paths_.empty() && (events_ || journal_dirs_.empty())) {
    print_error(events_ ? "diagnose --events: give the events files to merge" : "diagnose: give log files or directories (or --journal DIR)");
    return kExitUsage;
  }
  history_session history(history_path_, !no_history_, "the diagnosis is printed but not stored");
  pipeline::options opt;
  opt.ingest.max_line_bytes = max_line_kib_ << 10;
  opt.ingest.journal_dirs = journal_dirs_;
  opt.exact = exact_;
  opt.learn_lines = learn_lines_;
  opt.threads = threads_;
  opt.reveal = reveal_;
  if (history.enabled()) {  // the first failing host's real name reaches only the history's salted key
    opt.host_keyer = [&history](const std::string& real) { return history.host_key(real); };
    opt.recurrences = [&history](const std::string& key, const std::string& kind, int days) {
      return history.recurrences(key, kind, days);
    };
  }
  history.get();  // a store that cannot be opened is said now, not in the middle of the progress line
  progress_line progress(!quiet_ && isatty(STDERR_FILENO));
  // A key given is a request for keyed pseudonyms: it implies --redact.
  const bool key_given = !key_.empty() || !key_file_.empty();
  auto mo = mask_options(mask_config_, mask_rules_, no_mask_, redact_ || key_given);
  if (!mo) {
    print_error(mo.error().message);
    return kExitUsage;
  }
  opt.mask = mo.value();
  if (opt.mask.enabled && opt.mask.redact && !events_) {
    auto site = key_given ? mask_key(key_, key_file_, "") : user_redact_key();
    if (!site) {
      print_error(site.error().message);
      return kExitUsage;
    }
    opt.mask.key = mask::job_key(site.value(), job_id_);
  }
  mask_ = opt.mask;
  if (opt.mask.enabled && opt.mask.redact && events_ && key_given) {  // the key the nodes' scans masked with
    if (auto k = mask_key(key_, key_file_, job_id_)) mask_.key = k.value();
  }
  auto run = events_ ? from_events(lib, opt) : pipeline::diagnose(paths_, lib, opt, progress);
  progress.clear();
  if (!run) {
    print_error(run.error().message);
    return exit_status(run.error());
  }
  const auto& r = run.value();
  // The text report ends with its notes: on a terminal, stderr would show each one twice. Elsewhere
  // (another format, or the report going to a file or a pipe) stderr carries them to the user.
  bool report_shows_notes = format_ == "text" && !brief_ && isatty(STDOUT_FILENO);
  if (!quiet_ && !report_shows_notes)
    for (const auto& n : report::note_lines(r.errors)) print_error(n);
  print_report(r);
  if (!r.any_readable) print_error("nothing readable in the inputs");
  if (reveal_) print_revealed(r);
  if (r.any_readable) history.add(history::entry_of(r, "diagnose"));
  return exit_code_ == "action" ? report::action_exit_code(r) : report::exit_code(r);
}

// Every events file that reads is merged; one that does not is an input error of the run (named, with the
// reason), as an unreadable log is. Files masked with different keys cannot be merged: their tokens differ.
result<pipeline::run> diagnose_command::from_events(const kb::library& lib, const pipeline::options& opt) const {
  events::merger merger;
  std::vector<ingest::input_error> bad;
  std::vector<std::string> notes;
  std::optional<std::string> first_key;
  std::string first_key_file, first_way_file;
  std::optional<int> first_way;
  std::set<std::pair<dev_t, ino_t>> seen;
  std::size_t merged = 0;
  for (const auto& p : paths_) {
    std::string shown = text::sanitize(p);
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && !seen.insert({st.st_dev, st.st_ino}).second) {
      notes.push_back(shown + ": given twice; read once");
      continue;
    }
    std::string kid;
    auto s = events::read(p, lib, notes, &kid);
    if (!s) {
      // read() names the file; the input error names it once, in its own field
      std::string why = s.error().message;
      if (why.rfind(shown + ": ", 0) == 0) why.erase(0, shown.size() + 2);
      bad.push_back({p, why, true, false});
      continue;
    }
    // Three ways a node can have been scanned: --no-mask (nothing masked), the default (secrets and
    // e-mails masked, hosts shown) and --redact (hosts too, keyed). Files are merged only when made the same
    // way: real names beside tokens would defeat the redacted files' masking, and one host would appear
    // under two names; a --no-mask file's secrets would reach a report the others kept them out of.
    const int way = !s.value().masked ? 0 : s.value().redacted ? 2 : 1;
    static const char* const kWay[] = {"--no-mask", "the default masking (hosts shown)", "--redact"};
    if (!first_way) {
      first_way = way;
      first_way_file = p;
    } else if (*first_way != way) {
      return error{shown + " was scanned with " + kWay[way] + " and " + text::sanitize(first_way_file) + " with " + kWay[*first_way] +
                   ": they cannot be merged (scan every node the same way)"};
    }
    if (way == 2) {
      if (!first_key) {
        first_key = kid;
        first_key_file = p;
      } else if (*first_key != kid) {
        return error{shown + " was masked with another key than " + text::sanitize(first_key_file) +
                     ": host tokens of the two cannot be compared (scan every node with the same --job-id or --mask-key)"};
      }
      if (first_key->empty() && merged >= 1)
        return error{"the events files were masked without a shared key: every node numbered its hosts from node-1 (scan with --job-id or --mask-key)"};
    }
    merger.add(std::move(s).value());
    ++merged;
  }
  auto all = merger.take();
  for (auto& b : bad) all.errors.insert(all.errors.begin(), std::move(b));
  for (auto& n : notes) all.errors.push_back({"(events)", n, false, false});
  return pipeline::conclude(std::move(all), lib, opt);
}

void diagnose_command::print_report(const pipeline::run& r) const {
  if (format_ == "action") std::cout << action_line(r) << "\n";
  else if (format_ == "brief" || brief_) std::cout << report::to_brief(r);
  else if (format_ == "json") std::cout << report::to_json(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  else if (format_ == "markdown") std::cout << report::to_markdown(r);
  else if (format_ == "html") std::cout << report::to_html(r);
  else {
    bool color = use_color(color_);
    std::cout << report::to_terminal(r, {color});
    if (timeline_ && !r.timeline.empty()) std::cout << "\n" << timeline::to_text(r.timeline, 60, color);
  }
}

// "restart-excluding-hosts node7,node9" (or "stop-fix-code"): the action and the hosts it leaves out. With
// --action-hosts, each host is named by the job node it stands for: the same name (any capitals, or the
// short name of a full one), or the node whose masked token it is under the run's masking; hosts that are
// none of the nodes are dropped.
std::string diagnose_command::action_line(const pipeline::run& r) const {
  std::string o(action::to_string(r.any_readable ? r.action.what : action::kind::investigate));
  std::vector<std::string> hosts;
  auto lower = [](std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  auto short_of = [](const std::string& h) { return h.substr(0, h.find('.')); };
  mask::masker tokens(mask_);
  for (const auto& h : r.action.hosts) {
    if (action_hosts_.empty()) {
      hosts.push_back(h);
      continue;
    }
    for (const auto& node : action_hosts_) {
      bool same = lower(node) == lower(h) || lower(short_of(node)) == lower(short_of(h));
      if (!same && mask_.enabled && mask_.redact) same = tokens.mask_host(node, false) == h;
      if (same && std::find(hosts.begin(), hosts.end(), node) == hosts.end()) hosts.push_back(node);
    }
  }
  for (std::size_t i = 0; i < hosts.size(); ++i) o += (i == 0 ? " " : ",") + text::sanitize(hosts[i]);
  return o;
}

// stderr, so that no report format (stdout, history) ever carries a real name
void diagnose_command::print_revealed(const pipeline::run& r) const {
  if (r.revealed.empty()) print_error("--reveal: no masked host names in this run");
  else print_error("masked host names (this terminal only, never stored or sent):");
  for (const auto& [token, real] : r.revealed)
    std::fprintf(stderr, "  %s = %s\n", text::sanitize(token).c_str(), text::sanitize(real).c_str());
}

}  // namespace

std::unique_ptr<command> add_diagnose(CLI::App& app, std::vector<std::string>& kb_dirs) {
  return std::make_unique<diagnose_command>(app, kb_dirs);
}

}  // namespace ff::cli
