// `firstfault watch`: the follow loop, rotation/truncation handling, alerting and silence detection.
#include "firstfault/watch.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <memory>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "firstfault/report.hpp"
#include "firstfault/text.hpp"
#include "watch/slow_ranks.hpp"

namespace fs = std::filesystem;

namespace ff::watch {

namespace {

double now_unix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A followed file, read through the one line source (ingest::line_reader in follow mode): the same
// lines as `diagnose` reads from the same bytes (line ends, '\r' bars, CRI records joined, JSON records,
// NUL runs, the line bound).
class followed_bytes final : public ingest::line_reader::byte_source {
 public:
  int fd = -1;
  off_t offset = 0;
  int budget = -1;           // reads left in this pass (-1: no bound)
  std::uint64_t reads = 0;   // reads that returned bytes, ever
  long read(char* buf, std::size_t n, std::string*) override {
    if (budget == 0) return 0;
    ssize_t got = ::pread(fd, buf, n, offset);
    if (got <= 0) return 0;  // nothing more yet
    offset += got;
    if (budget > 0) --budget;
    ++reads;
    return static_cast<long>(got);
  }
};

struct tracked {
  std::string path;
  ino_t ino = 0, old_ino = 0;  // old_ino: the file before the last rotation (now under another name)
  std::unique_ptr<followed_bytes> src = std::make_unique<followed_bytes>();
  std::unique_ptr<ingest::line_reader> reader;  // over *src
  std::uint64_t counted = 0;  // reader->bytes_read() already in metrics::bytes
  pipeline::collector::stream st;
};

std::string prom_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\\' || c == '"') o += '\\';
    if (c == '\n') { o += "\\n"; continue; }
    o += c;
  }
  return o;
}

// Step times (stragglers.hpp): a gauge per compared rank and the count of slow ranks.
void append_step_metrics(std::string& o, const metrics& m) {
  o += "# HELP firstfault_rank_step_seconds Median seconds a step of each rank's recent progress lines (ranks with at least 8 timed steps).\n# TYPE firstfault_rank_step_seconds gauge\n";
  for (const auto& [w, s] : m.step_seconds) {
    char b[64];
    std::snprintf(b, sizeof b, "%.6f", s);
    o += std::string("firstfault_rank_step_seconds{") + (w.kind == writer::by::local_rank ? "local_rank" : "rank") + "=\"" +
         std::to_string(w.number) + "\"} " + b + "\n";
  }
  o += "# HELP firstfault_slow_ranks Ranks whose step time exceeds the other ranks' by the straggler margin now.\n# TYPE firstfault_slow_ranks gauge\n";
  o += "firstfault_slow_ranks " + std::to_string(m.slow_ranks) + "\n";
}

}  // namespace

std::string to_prometheus(const metrics& m, double now) {
  std::string o;
  o += "# HELP firstfault_lines_read_total Log lines read by firstfault watch.\n# TYPE firstfault_lines_read_total counter\n";
  o += "firstfault_lines_read_total " + std::to_string(m.lines) + "\n";
  if (m.ready) {
    o += "# HELP firstfault_files_followed Log files followed (present once the watcher has opened them).\n# TYPE firstfault_files_followed gauge\n";
    o += "firstfault_files_followed " + std::to_string(m.files) + "\n";
  }
  o += "# HELP firstfault_file_restarts_total Followed files that started over, by reason (rotated: renamed and recreated; truncated: cut in place, copytruncate).\n# TYPE firstfault_file_restarts_total counter\n";
  o += "firstfault_file_restarts_total{reason=\"rotated\"} " + std::to_string(m.rotations) + "\n";
  o += "firstfault_file_restarts_total{reason=\"truncated\"} " + std::to_string(m.truncations) + "\n";
  o += "# HELP firstfault_bytes_read_total Log bytes read by firstfault watch.\n# TYPE firstfault_bytes_read_total counter\n";
  o += "firstfault_bytes_read_total " + std::to_string(m.bytes) + "\n";
  o += "# HELP firstfault_alerts_total Alerts raised, by type (failure, update, hang).\n# TYPE firstfault_alerts_total counter\n";
  for (const auto& [t, n] : m.alerts) o += "firstfault_alerts_total{type=\"" + prom_escape(t) + "\"} " + std::to_string(n) + "\n";
  o += "# HELP firstfault_signature_hits_total Lines matched, by signature, kind, rank and host.\n# TYPE firstfault_signature_hits_total counter\n";
  for (const auto& [k, n] : m.hits)
    o += "firstfault_signature_hits_total{signature=\"" + prom_escape(k.signature) + "\",kind=\"" + prom_escape(k.kind) +
         "\",rank=\"" + prom_escape(k.rank) + "\",host=\"" + prom_escape(k.host) + "\"} " + std::to_string(n) + "\n";
  o += "# HELP firstfault_rank_seconds_since_last_line Seconds since each rank last wrote a line.\n# TYPE firstfault_rank_seconds_since_last_line gauge\n";
  for (const auto& [w, t] : m.last_line_at) {
    char b[64];
    std::snprintf(b, sizeof b, "%.3f", now - t);
    // the same label values as firstfault_signature_hits_total: rank="2", not rank="rank 2"
    std::string label;
    switch (w.kind) {
      case writer::by::rank: label = "rank=\"" + std::to_string(w.number) + "\""; break;
      case writer::by::local_rank: label = "local_rank=\"" + std::to_string(w.number) + "\""; break;
      case writer::by::file: label = "source=\"" + prom_escape(w.file) + "\""; break;
    }
    o += "firstfault_rank_seconds_since_last_line{" + label + "} " + b + "\n";
  }
  append_step_metrics(o, m);
  return o;
}

std::string writer::label() const {
  switch (kind) {
    case by::rank: return "rank " + std::to_string(number);
    case by::local_rank: return "local rank " + std::to_string(number);
    case by::file: break;
  }
  return file;
}

namespace {

// One watch: the files followed, the collector they feed, and what has been alerted. run() drives it; each
// step of the loop is a method (discover, read, check_rotation, check_silence, wait).
class follower {
 public:
  follower(const pipeline::engine& eng, const options& opt, const std::function<void(const alert&)>& sink, metrics* shared,
           std::mutex* shared_mu)
      : col_(eng, opt.pipeline), lib_(*eng.lib), opt_(opt), sink_(sink), mx_(shared ? *shared : local_),
        mu_(shared_mu ? *shared_mu : local_mu_), events_(opt.events ? *opt.events : pipeline::no_sink()) {
    ino_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  }
  ~follower() {
    for (auto& [p, t] : files_)
      if (t.src->fd >= 0) ::close(t.src->fd);
    if (ino_fd_ >= 0) ::close(ino_fd_);
  }
  follower(const follower&) = delete;
  follower& operator=(const follower&) = delete;

  status check() const { return col_.check(); }
  status loop(const std::atomic<bool>& stop);

 private:
  // Each writer's last line; a line the gated path kept raw is masked only when an alert shows it.
  struct last_line {
    std::string text;
    bool raw = false;
  };
  void watch_dir(const std::string& d);
  void discover();
  pipeline::run emit(const std::string& type, std::string extra_text, const std::vector<writer>& silent = {});
  void alert_on_cause();
  void on_line(tracked& t, std::string_view line, std::uint64_t line_no);
  bool read_file(tracked& t, bool to_end_only);
  void follow_file(const std::string& path, tracked& t);
  void check_update(double now);
  void check_silence(double now);
  void wait() const;
  void finish_sink();
  const std::string& shown(last_line& l) {
    if (l.raw) {
      l.text = col_.masker().apply_detached(l.text);
      l.raw = false;
    }
    return l.text;
  }
  // An alert's header says when it was raised (UTC wall clock): a pager shows it hours later.
  static std::string header(const std::string& type) {
    std::time_t t = static_cast<std::time_t>(now_unix());
    std::tm tm{};
    gmtime_r(&t, &tm);
    char b[32];
    std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S UTC", &tm);
    return "== firstfault watch: " + type + " alert at " + b;
  }

  pipeline::collector col_;
  const kb::library& lib_;
  const options& opt_;
  const std::function<void(const alert&)>& sink_;
  metrics local_;
  metrics& mx_;
  std::mutex local_mu_;
  std::mutex& mu_;
  pipeline::sink& events_;
  std::map<std::string, tracked> files_;  // by path
  std::set<std::string> aliases_;         // rotated names of followed files
  int ino_fd_ = -1;
  std::set<std::string> watched_dirs_;
  bool first_scan_ = true;
  std::uint32_t sources_ = 0;  // files opened (their source ids)
  std::optional<std::string> alerted_sig_;
  std::optional<int> alerted_rank_;
  int alerted_attempt_ = 0;  // the torchrun attempt the failure alert was about: a restart starts afresh
  std::size_t alerted_collateral_ = 0;
  bool pending_update_ = false;
  double last_update_ = 0;
  std::map<writer, double> last_line_at_;  // unix time
  std::map<writer, last_line> last_line_of_;
  std::set<writer> hang_reported_;
  detail::slow_rank_watch slow_watch_;  // slow ranks (stragglers.hpp): checked about once a second
  std::vector<int> slow_alert_ranks_;   // the rank of the slow_rank alert being emitted
  bool all_silent_reported_ = false;
  double last_any_ = 0;
  std::string first_brief_;  // the first failure alert's one-line verdict: updates say what changed from it
  bool cause_pending_ = false;  // a cause line was read since the last diagnosis
  bool stopped_ = false;        // the pipeline sink said stop
};

void follower::watch_dir(const std::string& d) {
  if (ino_fd_ < 0 || watched_dirs_.count(d)) return;
  if (inotify_add_watch(ino_fd_, d.c_str(), IN_CREATE | IN_MODIFY | IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE_SELF) >= 0)
    watched_dirs_.insert(d);
}

// Discovery: the given files, and log files under the given directories (new ones too). Each with the part
// of its path a hint may be read from, as `diagnose` reads it (ingest::hints_from_path's `below`): under a
// directory argument, its path below it; a file argument, its own name.
void follower::discover() {
  std::vector<std::pair<std::string, std::string>> found;  // (path, below)
  for (const auto& p : opt_.paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      watch_dir(p);
      for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_directory(ec) && !it->is_symlink(ec)) watch_dir(it->path().string());
        if (it->is_regular_file(ec) && ingest::looks_like_log_name(it->path().filename().string()))
          found.emplace_back(it->path().string(), it->path().lexically_relative(p).string());
      }
    } else {
      watch_dir(fs::path(p).parent_path().empty() ? "." : fs::path(p).parent_path().string());
      found.emplace_back(p, fs::path(p).filename().string());
    }
  }
  for (const auto& [f, below] : found) {
    if (files_.count(f) || aliases_.count(f)) continue;
    struct stat sb {};
    if (::stat(f.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
    // A file we already follow under another name (rotation renamed it): never read it twice.
    bool known = false;
    for (const auto& [p, t] : files_) known |= (t.ino == sb.st_ino || t.old_ino == sb.st_ino);
    if (known) {
      aliases_.insert(f);
      continue;
    }
    tracked t;
    t.path = f;
    t.src->fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (t.src->fd < 0) continue;
    t.ino = sb.st_ino;
    // Existing files start at their end unless --from-start; files that appear later from 0.
    t.src->offset = (first_scan_ && !opt_.from_start) ? sb.st_size : 0;
    t.reader = std::make_unique<ingest::line_reader>(*t.src, opt_.pipeline.ingest);
    t.reader->follow(true);
    ingest::source src{f, ingest::hints_from_path(f, below)};
    if (!events_.begin(sources_++, f)) stopped_ = true;
    t.st = col_.open_stream(src);
    files_.emplace(f, std::move(t));
  }
  first_scan_ = false;
}

// The first failure alert carries the whole report; later updates are one line each (the JSON report,
// for --json, --exec and webhooks, stays complete).
// `silent`: for a hang alert, the writers that went quiet (alert.silent, alert.silent_ranks in the JSON).
pipeline::run follower::emit(const std::string& type, std::string extra_text, const std::vector<writer>& silent) {
  // The second masking pass covers the alert's own text too (a last line kept before its host was learnt).
  if (col_.masker().enabled()) col_.masker().rescan(extra_text);
  pipeline::run r;
  r.any_readable = true;
  pipeline::finish(col_, r);
  r.total_lines = mx_.lines;
  r.total_bytes = mx_.bytes;
  for (const auto& [p, t] : files_) r.inputs.push_back({t.st.display, t.st.lines, 0});  // "from N input(s)" counts the files followed
  alert a;
  a.type = type;
  a.report = report::to_json(r);
  a.report["alert"] = {{"type", type}, {"detected_at_ms", static_cast<std::int64_t>(now_unix() * 1000)}};
  if (!silent.empty()) {
    auto labels = nlohmann::json::array(), ranks = nlohmann::json::array();
    for (const auto& w : silent) {
      labels.push_back(w.label());  // "rank 3", or a file name (masked display)
      if (w.kind == writer::by::rank) ranks.push_back(w.number);
    }
    a.report["alert"]["silent"] = std::move(labels);
    a.report["alert"]["silent_ranks"] = std::move(ranks);
  }
  if (type == "slow_rank") a.report["alert"]["slow_ranks"] = slow_alert_ranks_;
  auto brief_of = [](const pipeline::run& run) {
    std::string b = report::to_brief(run);
    while (!b.empty() && b.back() == '\n') b.pop_back();
    return b;
  };
  if (type == "update") {
    std::string brief = brief_of(r);
    a.text = header(type) + ": " + brief +
             (brief == first_brief_ ? fmt::format(" ({} collateral group(s) now)", r.diag.collateral.size())
                                    : " (was: " + first_brief_ + ")");
  } else if ((type == "hang" || type == "slow_rank") && r.diag.verdict == correlate::verdict::healthy) {
    // A silence or a slow rank with no failure line yet: the report would say "verdict: healthy" under a
    // "possible hang" (issue 46: watch messages must not contradict each other). Say what was read instead.
    a.text = header(type) + "\n" + extra_text +
             fmt::format("no failure line yet in {} line(s) from {} file(s): the {} above is the only sign of trouble so far\n",
                         mx_.lines, files_.size(), type == "hang" ? "silence" : "slow rank");
  } else {
    a.text = header(type) + "\n" + extra_text + report::to_terminal(r, {false});
    if (type == "failure") first_brief_ = brief_of(r);
  }
  a.initiating_host_key = r.initiating_host_key;
  for (const auto& [p, t] : files_) a.inputs += (a.inputs.empty() ? "" : "; ") + t.st.display;
  {
    std::lock_guard<std::mutex> g(mu_);
    ++mx_.alerts[type];
  }
  a.run = r;
  sink_(a);
  return r;
}

void follower::alert_on_cause() {
  cause_pending_ = false;
  auto d = col_.diagnose();
  if (d.verdict != correlate::verdict::failure || (alerted_sig_ && *alerted_sig_ == d.signature && alerted_rank_ == d.initiating_rank))
    return;
  auto r = emit(alerted_sig_ ? "update" : "failure", "");
  alerted_sig_ = d.signature;
  alerted_rank_ = d.initiating_rank;
  for (const auto& [p2, t2] : files_) alerted_attempt_ = std::max(alerted_attempt_, t2.st.attempt.value_or(0));
  alerted_collateral_ = r.diag.collateral.size();
  last_update_ = now_unix();
  pending_update_ = false;
}

// One line through the scan-first path, as diagnose: lines the gate does not hit keep only per-rank facts.
void follower::on_line(tracked& t, std::string_view line, std::uint64_t line_no) {
  std::size_t added = col_.add_line_gated(t.st, line.substr(0, opt_.pipeline.ingest.max_line_bytes), line_no);
  double now = now_unix();
  last_any_ = now;
  // per-rank activity for silence detection (masked text only)
  writer key = t.st.prev_rank        ? writer{writer::by::rank, *t.st.prev_rank, {}}
               : t.st.hint.rank       ? writer{writer::by::rank, *t.st.hint.rank, {}}
               : t.st.hint.local_rank ? writer{writer::by::local_rank, *t.st.hint.local_rank, {}}
                                      : writer{writer::by::file, 0, t.st.display};
  last_line_at_[key] = now;
  auto& ll = last_line_of_[key];
  ll.text = t.st.last_body;
  ll.raw = t.st.last_body_raw;
  hang_reported_.erase(key);
  all_silent_reported_ = false;
  {
    std::lock_guard<std::mutex> g(mu_);
    ++mx_.lines;
    mx_.last_line_at[key] = now;
    const auto& fs_ = col_.inputs().findings;
    for (std::size_t i = fs_.size() - added; i < fs_.size(); ++i) {
      const auto& f = fs_[i];
      const auto& s = lib_.signatures[static_cast<std::size_t>(f.signature)];
      mx_.hits[{s.name, s.kind, f.rank ? std::to_string(*f.rank) : "", f.host.value_or("")}]++;
    }
  }
  if (added == 0) return;
  const auto& fs_ = col_.inputs().findings;
  for (std::size_t i = fs_.size() - added; i < fs_.size(); ++i)
    cause_pending_ |= lib_.signatures[static_cast<std::size_t>(fs_[i].signature)].is_cause();
  if (alerted_sig_) pending_update_ = true;
}

// Reads what was written since the last pass, at most 4 MiB per file (64 reads of 64 KiB), then lets the
// others go; a rotated file is drained to its end. One correlation per read (64 KiB), not one per cause
// line: a storm of cause lines (every rank printing its own error) costs one diagnosis per read, and the
// alert still follows within it.
bool follower::read_file(tracked& t, bool to_end_only) {
  auto& src = *t.src;
  src.budget = to_end_only ? -1 : 64;
  const std::uint64_t reads_before = src.reads;
  std::uint64_t reads_seen = src.reads;
  ingest::raw_line raw;
  while (t.reader->next(raw)) {
    on_line(t, raw.text, raw.line_no);
    if (src.reads != reads_seen) {
      reads_seen = src.reads;
      if (cause_pending_) alert_on_cause();
    }
  }
  if (cause_pending_) alert_on_cause();
  const std::uint64_t bytes = t.reader->bytes_read();
  if (bytes != t.counted) {
    std::lock_guard<std::mutex> g(mu_);
    mx_.bytes += bytes - t.counted;
    t.counted = bytes;
  }
  return src.reads != reads_before;
}

// One followed file in one pass: rotated (finish the old file, then follow the new one from 0), truncated
// in place (copytruncate: read again from 0), then what was written since.
void follower::follow_file(const std::string& path, tracked& t) {
  struct stat sb {};
  bool exists = ::stat(path.c_str(), &sb) == 0;
  if (exists && sb.st_ino != t.ino) {
    // Rotated: finish the old file (still open) to its end, its last unterminated line too, then follow the
    // new one from 0 (the same stream: line numbers go on).
    read_file(t, true);
    t.reader->end_of_input();
    read_file(t, true);
    t.reader->resume();
    ::close(t.src->fd);
    t.src->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    t.old_ino = t.ino;
    t.ino = sb.st_ino;
    t.src->offset = 0;
    {
      std::lock_guard<std::mutex> g(mu_);
      ++mx_.rotations;
    }
    if (t.src->fd < 0) return;
  } else if (exists && sb.st_size < t.src->offset) {
    t.src->offset = 0;  // truncated in place (copytruncate): read what was written since
    t.reader->drop_partial();
    std::lock_guard<std::mutex> g(mu_);
    ++mx_.truncations;
  }
  if (t.src->fd >= 0) read_file(t, false);
}

void follower::check_update(double now) {
  if (!pending_update_ || now - last_update_ < opt_.update_interval_s) return;
  auto d = col_.diagnose();
  if (d.collateral.size() != alerted_collateral_) {
    emit("update", "");
    alerted_collateral_ = d.collateral.size();
  }
  pending_update_ = false;
  last_update_ = now;
}

// Silence: one rank quiet while others write, or everyone quiet after having written. A rank that failed (a
// cause line or a non-zero exit) is not hanging, and once a failure was alerted the job's silence is its
// end, not a hang. After a torchrun restart, the new attempt is watched afresh: only its failures count.
void follower::check_silence(double now) {
  int cur_attempt = 0;
  for (const auto& [p2, t2] : files_) cur_attempt = std::max(cur_attempt, t2.st.attempt.value_or(0));
  const bool failure_alerted = alerted_sig_ && alerted_attempt_ >= cur_attempt;
  // The failed ranks are looked up only when a rank has been silent long enough to matter (not every poll).
  std::optional<std::set<int>> failed;  // ranks
  auto has_failed = [&](const writer& key) {
    if (key.kind != writer::by::rank) return false;
    if (!failed) {
      failed.emplace();
      for (const auto& f : col_.inputs().findings)
        if (f.rank && f.attempt.value_or(0) == cur_attempt && lib_.signatures[static_cast<std::size_t>(f.signature)].is_cause())
          failed->insert(*f.rank);
      for (const auto& e : col_.inputs().exits)
        if (e.rank && e.attempt.value_or(0) == cur_attempt && e.exitcode && *e.exitcode != 0) failed->insert(*e.rank);
    }
    return failed->count(key.number) > 0;
  };
  if (last_any_ > 0 && last_line_at_.size() > 1 && !failure_alerted) {
    for (const auto& [key, at] : last_line_at_) {
      if (now - at <= opt_.silence_s || hang_reported_.count(key) || has_failed(key)) continue;
      bool others_active = false;
      for (const auto& [k2, at2] : last_line_at_) others_active |= (k2 != key && now - at2 < opt_.silence_s);
      if (now - at > opt_.silence_s && others_active && !hang_reported_.count(key)) {
        hang_reported_.insert(key);
        std::string extra = "possible hang: " + key.label() + " has written nothing for " + std::to_string(static_cast<int>(now - at)) +
                            " s while other ranks go on; its last line: " + shown(last_line_of_[key]) + "\n";
        emit("hang", extra, {key});
      }
    }
  }
  if (last_any_ > 0 && now - last_any_ > opt_.silence_s && !all_silent_reported_ && !failure_alerted) {
    all_silent_reported_ = true;
    std::string extra = "possible hang: every rank has been silent for " + std::to_string(static_cast<int>(now - last_any_)) + " s; last lines:\n";
    std::vector<writer> all;
    for (auto& [k, l] : last_line_of_) {
      extra += "  " + k.label() + ": " + shown(l) + "\n";
      all.push_back(k);
    }
    emit("hang", extra, all);
  }
}

// Until inotify says something changed, or the poll interval passes.
void follower::wait() const {
  if (ino_fd_ >= 0) {
    pollfd p{ino_fd_, POLLIN, 0};
    if (::poll(&p, 1, opt_.poll_ms) > 0) {
      char evbuf[8192];
      while (::read(ino_fd_, evbuf, sizeof evbuf) > 0) {
      }
    }
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(opt_.poll_ms));
  }
}

// options::events: the run as it stands when the watch ends (what `diagnose` would report of the lines read).
void follower::finish_sink() {
  if (!opt_.events) return;
  pipeline::run r;
  r.any_readable = true;
  pipeline::finish(col_, r);
  r.total_lines = mx_.lines;
  r.total_bytes = mx_.bytes;
  for (const auto& [p, t] : files_) r.inputs.push_back({t.st.display, t.st.lines, 0});
  events_.finish(col_, r);
}

status follower::loop(const std::atomic<bool>& stop) {
  auto started = std::chrono::steady_clock::now();
  while (!stop.load() && !stopped_) {
    if (auto st = col_.check(); !st) return st;  // a matching-engine error: stop with an error, never a quiet "no alert"
    if (opt_.run_for_s && std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() > *opt_.run_for_s)
      break;
    discover();
    {
      std::lock_guard<std::mutex> g(mu_);
      mx_.files = files_.size();  // also the readiness signal: set once the first scan has opened them
      mx_.ready = true;
    }
    std::uint64_t bytes = 0;
    for (auto& [path, t] : files_) {
      follow_file(path, t);
      bytes += t.counted;
    }
    if (!events_.progress(bytes, files_.size())) break;
    double now = now_unix();
    check_update(now);
    // Slow ranks (slow_ranks.hpp): one alert per rank and restart attempt, none once a failure was alerted.
    slow_watch_.poll(now, col_.inputs(), mx_, mu_, !alerted_sig_, [&](const correlate::slow_rank& s) {
      slow_alert_ranks_.assign(1, s.rank);
      emit("slow_rank", detail::slow_rank_text(s));
    });
    check_silence(now);
    wait();
  }
  finish_sink();
  return ok();
}

}  // namespace

status run(const pipeline::engine& eng, const options& opt, const std::function<void(const alert&)>& sink,
           const std::atomic<bool>& stop, metrics* shared, std::mutex* shared_mu) {
  follower f(eng, opt, sink, shared, shared_mu);
  if (auto st = f.check(); !st) return st;
  return f.loop(stop);
}

}  // namespace ff::watch
