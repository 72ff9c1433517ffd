// firstfault watch PATH...: follow a running job's logs; each alert goes to stdout, --exec, --webhook and
// the history; --metrics serves Prometheus counters.
#include <httplib.h>
#include <re2/re2.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "commands.hpp"
#include "common.hpp"
#include "firstfault/pipeline.hpp"
#include "firstfault/record.hpp"
#include "firstfault/watch.hpp"

namespace ff::cli {
namespace {

std::atomic<bool> g_stop{false};

// Retries of a webhook POST, and how long each connect/read/write may take (seconds).
constexpr int kWebhookTries = 3;
constexpr int kWebhookTimeoutS = 5;

// POST with retries; returns an empty string on success, else the last error.
std::string post_json(const std::string& url, const std::string& body) {
  static const re2::RE2 url_re(R"(^(https?://[^/]+)(/.*)?$)");
  std::string base, path;
  if (!re2::RE2::FullMatch(url, url_re, &base, &path)) return "not an http(s) URL: " + url;
  if (path.empty()) path = "/";
  std::string last;
  for (int attempt = 0; attempt < kWebhookTries; ++attempt) {
    httplib::Client cli(base);
    cli.set_connection_timeout(kWebhookTimeoutS, 0);
    cli.set_read_timeout(kWebhookTimeoutS, 0);
    cli.set_write_timeout(kWebhookTimeoutS, 0);
    auto res = cli.Post(path, body, "application/json");
    if (res && res->status >= 200 && res->status < 300) return "";
    last = res ? "HTTP " + std::to_string(res->status) : httplib::to_string(res.error());
    std::this_thread::sleep_for(std::chrono::milliseconds(200 << attempt));  // back-off between tries, not a wait for readiness
  }
  return last;
}

// --metrics HOST:PORT: a cpp-httplib server on its own thread, stopped when the watch ends.
class metrics_server {
 public:
  metrics_server(watch::metrics& mx, std::mutex& mu) : mx_(mx), mu_(mu) {}
  ~metrics_server() {
    if (!server_) return;
    server_->stop();
    thread_.join();
  }
  /// Error text when HOST:PORT is malformed or cannot be bound; empty on success.
  std::string start(const std::string& listen) {
    auto colon = listen.rfind(':');
    if (colon == std::string::npos) return "--metrics expects HOST:PORT";
    std::string host = listen.substr(0, colon);
    int port = 0;
    const char* digits = listen.data() + colon + 1;
    auto [end, ec] = std::from_chars(digits, listen.data() + listen.size(), port);
    if (ec != std::errc() || end != listen.data() + listen.size() || port < 1 || port > 65535)
      return "--metrics " + listen + ": the port must be a number from 1 to 65535";
    server_ = std::make_unique<httplib::Server>();
    server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> g(mu_);
      double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
      res.set_content(watch::to_prometheus(mx_, now), "text/plain; version=0.0.4");
    });
    if (!server_->bind_to_port(host.c_str(), port)) {
      server_.reset();
      return "--metrics " + listen + ": cannot listen there";
    }
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    return "";
  }

 private:
  watch::metrics& mx_;
  std::mutex& mu_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

class watch_command final : public command {
 public:
  explicit watch_command(CLI::App& app) {
    sub_ = app.add_subcommand("watch", "follow a running job's logs and alert on the first fault");
    auto* w = sub_;
    w->add_option("paths", paths_, "log files or directories to follow")->required();
    w->add_flag("--from-start", from_start_, "read existing content first (default: start at the end)");
    w->add_option("--silence", silence_, "quiet time that counts as a possible hang, e.g. 300s, 5m");
    w->add_flag("--json", json_, "print alerts as JSON lines (same schema as diagnose --format json)");
    w->add_option("--exec", exec_, "run this shell command per alert, with the alert JSON on stdin");
    w->add_option("--webhook", webhook_, "POST each alert as JSON to this http:// URL (3 tries, 5 s timeout)");
    w->add_option("--metrics", metrics_, "serve Prometheus metrics on HOST:PORT (e.g. 127.0.0.1:9464)");
    w->add_option("--poll-ms", poll_ms_, "wake-up interval when nothing is written (ms)");
    w->add_option("--run-for", run_for_, "stop after this many seconds (default: until interrupted)");
    w->add_flag("--no-history", no_history_, "do not store alerts in the local history");
    w->add_option("--history", history_path_, "history database");
    w->add_flag("--no-mask", no_mask_, "do not mask addresses, host names, user names and secrets");
    w->add_option("--mask-rule", mask_rules_, "extra RE2 pattern to mask (repeatable)");
    w->add_option("--mask-config", mask_config_, "team masking config (YAML: enabled, rules, keep_hosts)");
  }
  bool parsed() const override { return sub_->parsed(); }
  int run(const kb::library& lib) override;

 private:
  void deliver(const watch::alert& al, history_session& history) const;

  CLI::App* sub_;
  std::vector<std::string> paths_, mask_rules_;
  std::string silence_ = "300s", exec_, webhook_, metrics_, history_path_, mask_config_;
  double run_for_ = 0;
  int poll_ms_ = 200;
  bool from_start_ = false, json_ = false, no_history_ = false, no_mask_ = false;
};

// One alert to every sink the user asked for; a failing sink is reported and the others still run.
void watch_command::deliver(const watch::alert& al, history_session& history) const {
  std::string js = al.report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::cout << (json_ ? js : al.text) << std::endl;
  if (!exec_.empty()) {
    if (FILE* p = ::popen(exec_.c_str(), "w")) {
      std::fwrite(js.data(), 1, js.size(), p);
      std::fputc('\n', p);
      if (int rc = ::pclose(p); rc != 0) print_error("--exec command exited with status " + std::to_string(rc));
    }
  }
  if (!webhook_.empty())
    if (auto err = post_json(webhook_, js); !err.empty()) print_error("--webhook " + webhook_ + ": " + err + " (alert not delivered)");
  if (al.type == "failure") history.add(history::entry_of(al.run, "watch", js));
}

int watch_command::run(const kb::library& lib) {
  auto eng = pipeline::engine::build(lib);
  if (!eng) {
    print_error(eng.error().message);
    return exit_status(eng.error());
  }
  watch::options opt;
  opt.paths = paths_;
  opt.from_start = from_start_;
  opt.poll_ms = poll_ms_;
  if (run_for_ > 0) opt.run_for_s = run_for_;
  auto sil = parse_duration(silence_);
  if (!sil) {
    print_error("--silence " + silence_ + ": expected a duration such as 300s or 5m");
    return kExitUsage;
  }
  opt.silence_s = *sil;
  auto mo = mask_options(mask_config_, mask_rules_, no_mask_);
  if (!mo) {
    print_error(mo.error().message);
    return kExitUsage;
  }
  opt.pipeline.mask = mo.value();
  std::signal(SIGINT, [](int) { g_stop = true; });
  std::signal(SIGTERM, [](int) { g_stop = true; });
  std::signal(SIGPIPE, SIG_IGN);

  watch::metrics mx;
  std::mutex mu;
  metrics_server server(mx, mu);
  if (!metrics_.empty())
    if (auto err = server.start(metrics_); !err.empty()) {
      print_error(err);
      return kExitUsage;
    }
  history_session history(history_path_, !no_history_, "alerts are printed but not stored");
  history.get();  // reported at start, not at the first alert
  // Recurrences count the jobs before this one: the first answer per (host, kind) is kept, so the failure
  // alert this watch stores does not count itself in the updates that follow.
  std::map<std::pair<std::string, std::string>, std::optional<std::int64_t>> seen;
  if (history.get()) {
    opt.pipeline.host_keyer = [&history](const std::string& real) { return history.host_key(real); };
    opt.pipeline.recurrences = [&history, &seen](const std::string& key, const std::string& kind, int days) {
      auto [it, fresh] = seen.try_emplace({key, kind});
      if (fresh) it->second = history.recurrences(key, kind, days);
      return it->second;
    };
  }
  auto st = watch::run(eng.value(), opt, [&](const watch::alert& al) { deliver(al, history); }, g_stop, &mx, &mu);
  if (!st) {
    print_error(st.error().message);
    return exit_status(st.error());
  }
  return 0;
}

}  // namespace

std::unique_ptr<command> add_watch(CLI::App& app) { return std::make_unique<watch_command>(app); }

}  // namespace ff::cli
