// firstfault run [--restarts N] [--exclude-template T] -- CMD ...: a supervisor that acts on the diagnosis.
//
// Runs the job's launcher, its stdout and stderr copied to the terminal and captured (merged, as
// `2>&1 | tee` would) into OUT/attempt_N/console.log; a `--log_dir`/`--log-dir` of the command is read
// too (only what the attempt added to it). When the launcher exits non-zero the attempt is diagnosed like
// `diagnose` (stored in the history, so recurrences count), and the report's action decides: restart and
// restart-excluding-hosts run the command again (the hosts through --exclude-template and the environment
// variable FIRSTFAULT_EXCLUDE_HOSTS), anything else stops and prints the report. docs/actions.md.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "commands.hpp"
#include "common.hpp"
#include "firstfault/action.hpp"
#include "firstfault/pipeline.hpp"
#include "firstfault/record.hpp"
#include "firstfault/report.hpp"
#include "firstfault/text.hpp"

namespace ff::cli {
namespace {

namespace fs = std::filesystem;

volatile sig_atomic_t g_child = 0;       // the launcher's pid while it runs
volatile sig_atomic_t g_interrupted = 0;  // SIGINT or SIGTERM arrived: no further attempt

// SIGINT reaches the launcher from the terminal by itself (same process group); SIGTERM (the scheduler
// ending the job) is passed on. Either way no attempt follows.
void on_signal(int sig) {
  g_interrupted = 1;
  if (sig == SIGTERM && g_child > 0) ::kill(static_cast<pid_t>(g_child), SIGTERM);
}

bool write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// Starts `argv` with `extra_env` added, copies its stdout and stderr to ours and to `console` until both
// close, and returns its exit status (128 + N for a signal N), or an error when it cannot be started.
result<int> run_tee(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env, const fs::path& console) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return error{std::string("pipe: ") + std::strerror(errno)};
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]), ::close(out[1]);
    return error{std::string("pipe: ") + std::strerror(errno)};
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return error{std::string("fork: ") + std::strerror(errno)};
  if (pid == 0) {
    ::signal(SIGPIPE, SIG_DFL);  // ignored here (run_command::run), not in the job: an ignored signal survives exec
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    for (const auto& e : extra_env) ::putenv(const_cast<char*>(e.c_str()));
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "firstfault run: cannot start %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  g_child = pid;
  ::close(out[1]);
  ::close(err[1]);
  std::ofstream log(console, std::ios::binary);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      write_all(i == 0 ? STDOUT_FILENO : STDERR_FILENO, buf, static_cast<std::size_t>(n));
      log.write(buf, n);
      log.flush();
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

// The value of the launcher's --log_dir / --log-dir (torchrun), or "" when the command has none.
std::string log_dir_of(const std::vector<std::string>& cmd) {
  for (std::size_t i = 0; i < cmd.size(); ++i)
    for (const char* name : {"--log_dir", "--log-dir"}) {
      std::string n = name;
      if (cmd[i] == n && i + 1 < cmd.size()) return cmd[i + 1];
      if (cmd[i].rfind(n + "=", 0) == 0) return cmd[i].substr(n.size() + 1);
    }
  return "";
}

// The command as one line for the terminal, words with spaces or quotes in single quotes.
std::string fmt_command(const std::vector<std::string>& cmd) {
  std::string o;
  for (const auto& w : cmd) {
    if (!o.empty()) o += ' ';
    if (!w.empty() && w.find_first_of(" \t'\"") == std::string::npos) {
      o += w;
      continue;
    }
    o += '\'';
    for (char c : w) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
    o += '\'';
  }
  return o;
}

std::set<std::string> entries_of(const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  if (dir.empty()) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.insert(e.path().string());
  return out;
}

class run_command final : public command {
 public:
  run_command(CLI::App& app, std::vector<std::string>& kb_dirs) {
    sub_ = app.add_subcommand("run", "run a training job's launcher; when it fails, diagnose it and restart only when the "
                                     "action is restart or restart-excluding-hosts (docs/actions.md)");
    sub_->add_option("--restarts", restarts_, "restarts at most (default 3)")->check(CLI::Range(0, 1000));
    sub_->add_option("--exclude-template", exclude_template_,
                     "how to leave hosts out of the next attempt: words put into the command, {hosts} replaced by the hosts "
                     "joined with commas; when the first word is a word of the command (srun --exclude={hosts}) the rest go "
                     "right after it, else all go after the command's first word");
    sub_->add_option("--out", out_dir_, "where each attempt's console.log is kept (default: a new directory under $TMPDIR)");
    sub_->add_option("--format,-f", format_, "the report when the job stops: text | json | markdown")
        ->check(CLI::IsMember({"text", "json", "markdown"}));
    sub_->add_option("--kb", kb_dirs, "extra directory of signature files (repeatable)")->check(CLI::ExistingDirectory);
    sub_->add_flag("--no-history", no_history_, "do not store the diagnoses in the history (recurrences are then not counted)");
    sub_->add_option("--history", history_path_, "history database (default $XDG_DATA_HOME/firstfault/history.db)");
    sub_->add_option("command", cmd_, "the launcher and its arguments, after --")->required();
    sub_->footer("Exit status: 0 when an attempt succeeded; else the stopping action's status as in `diagnose --exit-code "
                 "action` (10 restart and 11 restart-excluding-hosts when no restart is left, 12 stop-fix-code, 13 "
                 "stop-fix-config, 14 stop-fix-data, 15 investigate); 2 for a usage error or a launcher that cannot start.");
  }
  bool parsed() const override { return sub_->parsed(); }
  int run(const kb::library& lib) override;

 private:
  result<pipeline::run> diagnose_attempt(const kb::library& lib, history_session& history, const std::vector<std::string>& inputs,
                                         int status) const;
  void print_report(const pipeline::run& r) const;

  CLI::App* sub_;
  std::vector<std::string> cmd_;
  int restarts_ = 3;
  std::string exclude_template_, out_dir_, format_ = "text", history_path_;
  bool no_history_ = false;
};

result<pipeline::run> run_command::diagnose_attempt(const kb::library& lib, history_session& history,
                                                    const std::vector<std::string>& inputs, int status) const {
  pipeline::options opt;
  if (history.enabled()) {
    opt.host_keyer = [&history](const std::string& real) { return history.host_key(real); };
    opt.recurrences = [&history](const std::string& key, const std::string& kind, int days) { return history.recurrences(key, kind, days); };
  }
  auto mo = mask_options("", {}, false, false);
  if (!mo) return mo.error();
  opt.mask = mo.value();
  auto r = pipeline::diagnose(inputs, lib, opt);
  if (!r) return r;
  auto& run = r.value();
  if (run.diag.verdict == correlate::verdict::healthy) {  // the launcher failed, so "none" cannot be the answer
    run.action = {};
    run.action.what = action::kind::investigate;
    run.action.why = "The launcher exited with status " + std::to_string(status) + " and its output shows no failure: read it before deciding.";
  }
  if (run.any_readable) history.add(history::entry_of(run, "run"));
  return r;
}

void run_command::print_report(const pipeline::run& r) const {
  if (format_ == "json") std::cout << report::to_json(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  else if (format_ == "markdown") std::cout << report::to_markdown(r);
  else std::cout << report::to_terminal(r, {use_color("auto")});
  std::cout.flush();
}

int run_command::run(const kb::library& lib) {
  if (out_dir_.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "firstfault-run-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) {
      print_error("run: cannot create a directory under " + fs::temp_directory_path().string() + ": " + std::strerror(errno));
      return kExitUsage;
    }
    out_dir_ = tmpl;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a closed terminal or pipe (`| head`) must not end the supervision and orphan the job
  history_session history(history_path_, !no_history_, "the diagnoses are not stored");
  const std::string log_dir = log_dir_of(cmd_);
  std::vector<std::string> cmd = cmd_, excluded;
  for (int attempt = 0;; ++attempt) {
    fs::path dir = fs::path(out_dir_) / ("attempt_" + std::to_string(attempt));
    std::error_code ec;
    fs::create_directories(dir, ec);
    std::vector<std::string> env;
    if (!excluded.empty()) {
      std::string hosts;
      for (const auto& h : excluded) hosts += (hosts.empty() ? "" : ",") + h;
      env.push_back("FIRSTFAULT_EXCLUDE_HOSTS=" + hosts);
    }
    auto before = entries_of(log_dir);
    std::fprintf(stderr, "firstfault run: attempt %d: %s\n", attempt, text::sanitize(fmt_command(cmd)).c_str());
    auto status = run_tee(cmd, env, dir / "console.log");
    if (!status) {
      print_error("run: " + status.error().message);
      return kExitUsage;
    }
    if (status.value() == 0) {
      std::fprintf(stderr, "firstfault run: attempt %d succeeded (output kept in %s)\n", attempt, out_dir_.c_str());
      return 0;
    }
    std::vector<std::string> inputs{(dir / "console.log").string()};
    for (const auto& e : entries_of(log_dir))
      if (!before.count(e)) inputs.push_back(e);
    auto r = diagnose_attempt(lib, history, inputs, status.value());
    if (!r) {
      print_error("run: " + r.error().message);
      return exit_status(r.error());
    }
    const auto& a = r.value().action;
    std::string brief = report::to_brief(r.value());
    if (!brief.empty() && brief.back() == '\n') brief.pop_back();
    std::fprintf(stderr, "firstfault run: attempt %d exited with status %d: %s\n", attempt, status.value(), text::sanitize(brief).c_str());
    const bool restartable = a.retryable && (a.what == action::kind::restart || !exclude_template_.empty());
    if (!restartable || attempt >= restarts_ || g_interrupted) {
      std::string why = g_interrupted ? "interrupted"
                        : !a.retryable ? "the action is " + std::string(action::to_string(a.what))
                        : !restartable ? "restart-excluding-hosts needs --exclude-template to leave the hosts out"
                                       : "no restart left (--restarts " + std::to_string(restarts_) + ")";
      std::fprintf(stderr, "firstfault run: stopping: %s (output kept in %s)\n", why.c_str(), out_dir_.c_str());
      print_report(r.value());
      return action::exit_status(a.what);
    }
    for (const auto& h : a.hosts)
      if (std::find(excluded.begin(), excluded.end(), h) == excluded.end()) excluded.push_back(h);
    cmd = action::excluding(cmd_, exclude_template_, excluded);
    std::fprintf(stderr, "firstfault run: %s: %s\n", std::string(action::to_string(a.what)).c_str(), text::sanitize(a.why).c_str());
  }
}

}  // namespace

std::unique_ptr<command> add_run(CLI::App& app, std::vector<std::string>& kb_dirs) { return std::make_unique<run_command>(app, kb_dirs); }

}  // namespace ff::cli
