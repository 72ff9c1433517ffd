// firstfault watch PATH...: follow a running job's logs; each alert goes to stdout, --exec, --webhook and
// the history; --metrics serves Prometheus counters.
#include <httplib.h>
#include <re2/re2.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <ctime>
#include <optional>
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

// A POST (webhook, Alertmanager) gets 3 tries with back-off, each connect/read/write at most 5 s, and
// 10 s in all: a slow or silent receiver (one that sends a byte every 4 s) must not hold an alert, the
// next alert or the end of the watch. Sends run on their own thread (outbox), never on the watch loop.
constexpr int kPostTries = 3;
constexpr int kPostTimeoutS = 5;
constexpr auto kPostBudget = std::chrono::seconds(10);
// What is still queued when the watch ends (the alerts' resolution among it) gets this long in all.
constexpr auto kShutdownBudget = std::chrono::seconds(5);
constexpr std::size_t kOutboxMax = 256;

// POSTs with retries until `deadline`; cancel() from another thread ends the POST in flight (cpp-httplib's
// Client::stop() shuts its socket down). Returns "" on success, else the last error.
class poster {
 public:
  std::string post(const std::string& url, const std::string& body, std::chrono::steady_clock::time_point deadline) {
    static const re2::RE2 url_re(R"(^(https?://[^/]+)(/.*)?$)");
    std::string base, path;
    if (!re2::RE2::FullMatch(url, url_re, &base, &path)) return "not an http(s) URL: " + url;
    if (path.empty()) path = "/";
    std::string last = "no time left to send";
    bool done = false;
    httplib::Client* current = nullptr;
    // The watchdog: at the deadline (or on cancel) it stops whatever request is in flight, again every
    // 100 ms until the sender sees it (a request that was only starting when it was first stopped).
    std::thread dog([&] {
      std::unique_lock lk(mu_);
      if (!cv_.wait_until(lk, deadline, [&] { return done || cancelled_; }) || !done) {
        expired_ = true;
        while (!done) {
          if (current) current->stop();
          cv_.wait_for(lk, std::chrono::milliseconds(100), [&] { return done; });
        }
      }
    });
    for (int attempt = 0; attempt < kPostTries; ++attempt) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      auto each = std::min<std::chrono::milliseconds>(left, std::chrono::seconds(kPostTimeoutS));
      httplib::Client cli(base);
      cli.set_connection_timeout(each);
      cli.set_read_timeout(each);
      cli.set_write_timeout(each);
      {
        std::lock_guard g(mu_);
        if (expired_) break;
        current = &cli;
      }
      auto res = cli.Post(path, body, "application/json");
      {
        std::lock_guard g(mu_);
        current = nullptr;
      }
      if (res && res->status >= 200 && res->status < 300) {
        last.clear();
        break;
      }
      last = res ? "HTTP " + std::to_string(res->status) : httplib::to_string(res.error());
      std::unique_lock lk(mu_);  // back-off between tries, cut short by the deadline or a cancel
      if (cv_.wait_for(lk, std::chrono::milliseconds(200 << attempt), [&] { return expired_ || cancelled_; })) break;
    }
    {
      std::lock_guard g(mu_);
      if (!last.empty() && expired_) last += cancelled_ ? " (cancelled: the watch ended)" : " (gave up after 10 s)";
      done = true;
      expired_ = false;
    }
    cv_.notify_all();
    dog.join();
    return last;
  }
  void cancel() {
    {
      std::lock_guard g(mu_);
      cancelled_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool cancelled_ = false, expired_ = false;
};

// The queue of POSTs and the thread that sends them, in order. finish() sends what is queued within
// kShutdownBudget, then cancels the rest (each dropped POST is said).
class outbox {
 public:
  struct job {
    std::string url, body, what;  // what: "--webhook URL" for messages; the URL itself is never the secret part
    std::string consequence;      // said after the error: "(alert not delivered)"
  };
  outbox() : thread_([this] { loop(); }) {}
  ~outbox() { finish(); }
  void push(job j) {
    {
      std::lock_guard g(mu_);
      if (closed_) return;
      if (queue_.size() >= kOutboxMax) {
        print_error(j.what + ": " + std::to_string(kOutboxMax) + " sends are waiting for a slow receiver; this one is dropped " + j.consequence);
        return;
      }
      queue_.push_back(std::move(j));
    }
    cv_.notify_all();
  }
  void finish() {
    {
      std::lock_guard g(mu_);
      if (closed_) return;
      closed_ = true;
      shutdown_deadline_ = std::chrono::steady_clock::now() + kShutdownBudget;
    }
    cv_.notify_all();
    // The sender drains the queue with the shutdown deadline; past it, the send in flight is cancelled.
    std::thread timer([this] {
      std::unique_lock lk(mu_);
      if (!cv_.wait_until(lk, shutdown_deadline_, [&] { return drained_; })) {
        lk.unlock();
        poster_.cancel();
      }
    });
    thread_.join();
    {
      std::lock_guard g(mu_);
      drained_ = true;
    }
    cv_.notify_all();
    timer.join();
  }

 private:
  void loop() {
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return closed_ || !queue_.empty(); });
      if (queue_.empty()) break;
      job j = std::move(queue_.front());
      queue_.pop_front();
      auto deadline = std::chrono::steady_clock::now() + kPostBudget;
      if (closed_) deadline = std::min(deadline, shutdown_deadline_);
      lk.unlock();
      std::string err = std::chrono::steady_clock::now() < deadline ? poster_.post(j.url, j.body, deadline) : "the watch ended before it was sent";
      if (!err.empty()) print_error(j.what + ": " + err + " " + j.consequence);
      lk.lock();
    }
    drained_ = true;
    cv_.notify_all();
  }
  poster poster_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<job> queue_;
  bool closed_ = false, drained_ = false;
  std::chrono::steady_clock::time_point shutdown_deadline_;
  std::thread thread_;
};

// RFC 3339 UTC with milliseconds, as Alertmanager's API wants startsAt/endsAt.
std::string rfc3339(std::chrono::system_clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms % 1000));
  return out;
}

// "3", "0-7", "0-3,8,12-15" (at most 200 bytes; "+N more" past that) from sorted distinct ranks.
std::string rank_ranges(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    std::string part = std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
    if (out.size() + part.size() > 200) {
      out += ",+" + std::to_string(ranks.size() - i) + " more";
      break;
    }
    out += (out.empty() ? "" : ",") + part;
    i = j + 1;
  }
  return out;
}

// --alertmanager URL: each alert goes to Alertmanager's v2 API (POST /api/v2/alerts, a JSON list of
// {labels, annotations, startsAt, endsAt, generatorURL}: https://github.com/prometheus/alertmanager/blob/main/api/v2/openapi.yaml).
// An alert's labels (its identity in Alertmanager) are fixed when it first fires: alertname (FirstfaultFailure
// or FirstfaultHang), signature, kind, host, ranks, plus --alert-label pairs; later updates refresh the
// annotations (summary, description, fix, verify). Alertmanager resolves an alert that is not re-sent before
// its endsAt, so active alerts are re-sent every `repeat` seconds with endsAt three periods ahead; when the
// watch ends (the job ended: --run-for, SIGTERM from the scheduler, Ctrl-C) they are sent once more with
// endsAt now, which resolves them.
class alertmanager_client {
 public:
  alertmanager_client(std::string url, std::map<std::string, std::string> extra, double repeat_s, outbox& out)
      : url_(std::move(url)), extra_(std::move(extra)), repeat_(repeat_s), out_(out) {
    while (!url_.empty() && url_.back() == '/') url_.pop_back();
    thread_ = std::thread([this] { refresh_loop(); });
  }
  ~alertmanager_client() {
    {
      std::lock_guard g(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
    resolve_all();
  }
  void on_alert(const watch::alert& al) {
    const auto& r = al.report;
    auto str = [](const nlohmann::json& j, const char* k) {
      return j.is_object() && j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string();
    };
    const auto& rc = r.contains("root_cause") ? r["root_cause"] : nlohmann::json::object();
    // hang and slow_rank (a straggler) are alerts of their own; failure and its updates are one alert
    std::string type = al.type == "hang" || al.type == "slow_rank" ? al.type : "failure";
    const bool per_ranks = type != "failure";
    std::string signature = per_ranks ? type : str(rc, "signature");
    std::string key;
    std::unique_lock g(mu_);
    {
      nlohmann::json labels = nlohmann::json::object();
      for (const auto& [k, v] : extra_) labels[k] = v;
      labels["alertname"] = type == "hang" ? "FirstfaultHang" : type == "slow_rank" ? "FirstfaultSlowRank" : "FirstfaultFailure";
      labels["signature"] = signature.empty() ? "undetermined" : signature;
      labels["kind"] = per_ranks ? type : (str(rc, "kind").empty() ? "undetermined" : str(rc, "kind"));
      labels["host"] = str(r, "initiating_host");
      std::vector<int> ranks;
      if (r.contains("initiating_rank") && r["initiating_rank"].is_number_integer()) ranks.push_back(r["initiating_rank"].get<int>());
      const char* alert_ranks = type == "slow_rank" ? "slow_ranks" : "silent_ranks";
      if (type == "slow_rank") ranks.clear();  // the slow rank, not the first failing rank of the report
      if (ranks.empty() && r.contains("alert") && r["alert"].contains(alert_ranks) && r["alert"][alert_ranks].is_array())
        for (const auto& x : r["alert"][alert_ranks])
          if (x.is_number_integer()) ranks.push_back(x.get<int>());
      if (type == "slow_rank" && ranks.size() == 1 && r.contains("slow_ranks") && r["slow_ranks"].is_array())
        for (const auto& s : r["slow_ranks"])  // the slow rank's host, not the first failing rank's
          if (s.contains("rank") && s["rank"] == ranks[0]) labels["host"] = str(s, "host");
      std::string rr = rank_ranges(ranks);
      if (!rr.empty()) labels["ranks"] = rr;  // an empty label is the same as none to Alertmanager
      // A failure alert keeps its identity while updates add collateral (type and signature); a hang alert
      // is one per set of silent ranks.
      key = type + "\n" + signature + (per_ranks ? "\n" + rr : "");
      if (!active_.count(key)) active_.emplace(key, entry{std::move(labels), nlohmann::json::object(), std::chrono::system_clock::now()});
    }
    auto it = active_.find(key);
    auto& ann = it->second.annotations;
    ann["summary"] = str(rc, "title").empty() ? al.text.substr(0, al.text.find('\n')) : str(rc, "title");
    if (type == "slow_rank") {  // the line that names the rank, under the alert's header
      auto nl = al.text.find('\n');
      ann["summary"] = nl == std::string::npos ? al.text : al.text.substr(nl + 1, al.text.find('\n', nl + 1) - nl - 1);
    }
    ann["description"] = str(rc, "summary");
    ann["rank_rule"] = str(r, "initiating_rule");
    std::string fix, verify;
    if (r.contains("fix") && r["fix"].contains("steps") && r["fix"]["steps"].is_array() && !r["fix"]["steps"].empty() && r["fix"]["steps"][0].is_string())
      fix = r["fix"]["steps"][0].get<std::string>();
    if (r.contains("verify") && r["verify"].is_array() && !r["verify"].empty() && r["verify"][0].is_string()) verify = r["verify"][0].get<std::string>();
    ann["fix"] = fix;
    ann["verify"] = verify;
    auto payload = payload_locked(false);
    g.unlock();
    send(std::move(payload), false);
  }

 private:
  struct entry {
    nlohmann::json labels, annotations;
    std::chrono::system_clock::time_point starts;
  };
  // The POST body for every active alert (empty when none), built under mu_ and sent after it is released.
  std::string payload_locked(bool resolve) const {
    if (active_.empty()) return "";
    auto now = std::chrono::system_clock::now();
    auto ends = resolve ? now : now + std::chrono::milliseconds(static_cast<long>(repeat_ * 3000));
    nlohmann::json list = nlohmann::json::array();
    for (const auto& [_, e] : active_)
      list.push_back({{"labels", e.labels}, {"annotations", e.annotations}, {"startsAt", rfc3339(e.starts)}, {"endsAt", rfc3339(ends)},
                      {"generatorURL", "https://github.com/firstfault/firstfault#watch"}});
    return list.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  void send(std::string payload, bool resolve) {
    if (payload.empty()) return;
    out_.push({url_ + "/api/v2/alerts", std::move(payload), "--alertmanager " + url_, resolve ? "(alerts not resolved)" : "(alert not delivered)"});
  }
  void refresh_loop() {
    std::unique_lock lk(mu_);
    while (!stopping_) {
      cv_.wait_for(lk, std::chrono::milliseconds(static_cast<long>(repeat_ * 1000)), [&] { return stopping_; });
      if (stopping_) break;
      auto payload = payload_locked(false);
      lk.unlock();
      send(std::move(payload), false);
      lk.lock();
    }
  }
  void resolve_all() {
    std::unique_lock g(mu_);
    auto payload = payload_locked(true);
    active_.clear();
    g.unlock();
    send(std::move(payload), true);
  }
  std::string url_;
  std::map<std::string, std::string> extra_;
  double repeat_;
  outbox& out_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, entry> active_;
  std::thread thread_;
};

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
    w->add_option("--alertmanager", alertmanager_, "send alerts to this Alertmanager (http://HOST:9093, v2 API); resolved when the watch ends");
    w->add_option("--alert-label", alert_labels_, "extra Alertmanager label NAME=VALUE on every alert (repeatable), e.g. job=$SLURM_JOB_ID");
    w->add_option("--alertmanager-repeat", am_repeat_, "seconds between re-sends of active alerts (Alertmanager drops alerts not re-sent)")
        ->check(CLI::Range(1.0, 3600.0));
    w->add_option("--metrics", metrics_, "serve Prometheus metrics on HOST:PORT (e.g. 127.0.0.1:9464)");
    w->add_option("--poll-ms", poll_ms_, "wake-up interval when nothing is written (ms)");
    w->add_option("--run-for", run_for_, "stop after this many seconds (default: until interrupted)");
    w->add_flag("--no-history", no_history_, "do not store alerts in the local history");
    w->add_option("--history", history_path_, "history database");
    w->add_flag("--no-mask", no_mask_, "do not mask secrets and e-mail addresses (host names and addresses are shown unless --redact)");
    w->add_flag("--redact", redact_, "mask host names, addresses, MACs and user names too, with the per-user key's pseudonyms (the same as diagnose --redact)");
    w->add_option("--mask-rule", mask_rules_, "extra RE2 pattern to mask (repeatable)");
    w->add_option("--mask-config", mask_config_, "team masking config (YAML: enabled, rules, keep_hosts)");
  }
  bool parsed() const override { return sub_->parsed(); }
  int run(const kb::library& lib) override;

 private:
  void deliver(const watch::alert& al, history_session& history, alertmanager_client* am, outbox& out) const;

  CLI::App* sub_;
  std::vector<std::string> paths_, mask_rules_;
  std::string silence_ = "300s", exec_, webhook_, metrics_, history_path_, mask_config_, alertmanager_;
  std::vector<std::string> alert_labels_;
  double run_for_ = 0, am_repeat_ = 60;
  int poll_ms_ = 200;
  bool from_start_ = false, json_ = false, no_history_ = false, no_mask_ = false, redact_ = false;
};

// One alert to every sink the user asked for; a failing sink is reported and the others still run.
void watch_command::deliver(const watch::alert& al, history_session& history, alertmanager_client* am, outbox& out) const {
  std::string js = al.report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::cout << (json_ ? js : al.text) << std::endl;
  if (!exec_.empty()) {
    if (FILE* p = ::popen(exec_.c_str(), "w")) {
      std::fwrite(js.data(), 1, js.size(), p);
      std::fputc('\n', p);
      if (int rc = ::pclose(p); rc != 0) print_error("--exec command exited with status " + std::to_string(rc));
    }
  }
  if (!webhook_.empty()) out.push({webhook_, js, "--webhook " + webhook_, "(alert not delivered)"});
  if (am) am->on_alert(al);
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
  auto mo = mask_options(mask_config_, mask_rules_, no_mask_, redact_);
  if (!mo) {
    print_error(mo.error().message);
    return kExitUsage;
  }
  opt.pipeline.mask = mo.value();
  if (opt.pipeline.mask.enabled && opt.pipeline.mask.redact) {  // the same pseudonyms as diagnose --redact
    auto key = user_redact_key();
    if (!key) {
      print_error(key.error().message);
      return kExitUsage;
    }
    opt.pipeline.mask.key = key.value();
  }
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
  outbox out;  // declared before the Alertmanager client: the alerts' resolution is queued before it drains
  std::optional<alertmanager_client> am;
  if (!alertmanager_.empty()) {
    static const re2::RE2 label_re(R"(^([a-zA-Z_][a-zA-Z0-9_]*)=(.*)$)");  // Prometheus label names
    std::map<std::string, std::string> labels;
    for (const auto& l : alert_labels_) {
      std::string k, v;
      if (!re2::RE2::FullMatch(l, label_re, &k, &v)) {
        print_error("--alert-label " + l + ": expected NAME=VALUE with NAME matching [a-zA-Z_][a-zA-Z0-9_]*");
        return kExitUsage;
      }
      if (k == "alertname" || k == "signature" || k == "kind" || k == "host" || k == "ranks" || k.rfind("__", 0) == 0) {
        print_error("--alert-label " + l + ": " + k + " is set by firstfault itself (names starting with __ are reserved by Prometheus)");
        return kExitUsage;
      }
      if (v.empty()) {
        print_error("--alert-label " + l + ": empty value (Alertmanager treats an empty label as no label)");
        return kExitUsage;
      }
      labels[k] = v;
    }
    if (alertmanager_.rfind("http://", 0) != 0 && alertmanager_.rfind("https://", 0) != 0) {
      print_error("--alertmanager " + alertmanager_ + ": expected an http:// or https:// URL");
      return kExitUsage;
    }
    am.emplace(alertmanager_, std::move(labels), am_repeat_, out);
  }
  auto st = watch::run(eng.value(), opt, [&](const watch::alert& al) { deliver(al, history, am ? &*am : nullptr, out); }, g_stop, &mx, &mu);
  am.reset();     // queues the active alerts' resolution
  out.finish();   // sends what is queued, within kShutdownBudget
  if (!st) {
    print_error(st.error().message);
    return exit_status(st.error());
  }
  return 0;
}

}  // namespace

std::unique_ptr<command> add_watch(CLI::App& app) { return std::make_unique<watch_command>(app); }

}  // namespace ff::cli
