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

struct tracked {
  std::string path;
  int fd = -1;
  ino_t ino = 0, old_ino = 0;  // old_ino: the file before the last rotation (now under another name)
  off_t offset = 0;
  std::string partial;  // bytes after the last newline, waiting for the rest of the line
  std::uint64_t line_no = 0;
  pipeline::collector::stream st;
  std::string cri_join;  // a CRI partial record (P) and the parts that continue it, until its F record
  std::uint64_t cri_line = 0;
  char cri_stream = 0;
  bool joining = false;
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

status run(const pipeline::engine& eng, const options& opt, const std::function<void(const alert&)>& sink,
           const std::atomic<bool>& stop, metrics* shared, std::mutex* shared_mu) {
  pipeline::collector col(eng, opt.pipeline);
  if (auto st = col.check(); !st) return st;
  const auto& lib = *eng.lib;
  std::map<std::string, tracked> files;  // by path
  std::set<std::string> aliases;          // rotated names of followed files
  int ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  std::set<std::string> watched_dirs;
  auto watch_dir = [&](const std::string& d) {
    if (ino_fd < 0 || watched_dirs.count(d)) return;
    if (inotify_add_watch(ino_fd, d.c_str(), IN_CREATE | IN_MODIFY | IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE_SELF) >= 0)
      watched_dirs.insert(d);
  };
  metrics local;
  metrics& mx = shared ? *shared : local;
  std::mutex local_mu;
  std::mutex& mu = shared_mu ? *shared_mu : local_mu;

  // Discovery: the given files, and log files under the given directories (new ones too).
  bool first_scan = true;
  auto discover = [&] {
    std::vector<std::string> found;
    for (const auto& p : opt.paths) {
      std::error_code ec;
      if (fs::is_directory(p, ec)) {
        watch_dir(p);
        for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
             !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
          if (it->is_directory(ec) && !it->is_symlink(ec)) watch_dir(it->path().string());
          if (it->is_regular_file(ec) && ingest::looks_like_log_name(it->path().filename().string()))
            found.push_back(it->path().string());
        }
      } else {
        watch_dir(fs::path(p).parent_path().empty() ? "." : fs::path(p).parent_path().string());
        found.push_back(p);
      }
    }
    for (const auto& f : found) {
      if (files.count(f) || aliases.count(f)) continue;
      struct stat sb {};
      if (::stat(f.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
      // A file we already follow under another name (rotation renamed it): never read it twice.
      bool known = false;
      for (const auto& [p, t] : files) known |= (t.ino == sb.st_ino || t.old_ino == sb.st_ino);
      if (known) {
        aliases.insert(f);
        continue;
      }
      tracked t;
      t.path = f;
      t.fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
      if (t.fd < 0) continue;
      t.ino = sb.st_ino;
      // Existing files start at their end unless --from-start; files that appear later from 0.
      t.offset = (first_scan && !opt.from_start) ? sb.st_size : 0;
      ingest::source src{f, ingest::hints_from_path(f)};
      t.st = col.open_stream(src);
      files.emplace(f, std::move(t));
    }
    first_scan = false;
  };

  std::optional<std::string> alerted_sig;
  std::optional<int> alerted_rank;
  int alerted_attempt = 0;  // the torchrun attempt the failure alert was about: a restart starts afresh
  std::size_t alerted_collateral = 0;
  bool pending_update = false;
  double last_update = 0;
  std::map<writer, double> last_line_at;  // unix time
  // Each writer's last line; a line the gated path kept raw is masked only when an alert shows it.
  struct last_line {
    std::string text;
    bool raw = false;
  };
  std::map<writer, last_line> last_line_of;
  auto shown = [&](last_line& l) -> const std::string& {
    if (l.raw) {
      l.text = col.masker().apply_detached(l.text);
      l.raw = false;
    }
    return l.text;
  };
  std::set<writer> hang_reported;
  detail::slow_rank_watch slow_watch;  // slow ranks (stragglers.hpp): checked about once a second
  std::vector<int> slow_alert_ranks;   // the rank of the slow_rank alert being emitted
  bool all_silent_reported = false;
  double last_any = 0;

  // An alert's header says when it was raised (UTC wall clock): a pager shows it hours later.
  auto header = [&](const std::string& type) {
    std::time_t t = static_cast<std::time_t>(now_unix());
    std::tm tm{};
    gmtime_r(&t, &tm);
    char b[32];
    std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S UTC", &tm);
    return "== firstfault watch: " + type + " alert at " + b;
  };
  std::string first_brief;  // the first failure alert's one-line verdict: updates say what changed from it
  // The first failure alert carries the whole report; later updates are one line each (the JSON report,
  // for --json, --exec and webhooks, stays complete).
  // `silent`: for a hang alert, the writers that went quiet (alert.silent, alert.silent_ranks in the JSON).
  auto emit = [&](const std::string& type, std::string extra_text, const std::vector<writer>& silent = {}) {
    // The second masking pass covers the alert's own text too (a last line kept before its host was learnt).
    if (col.masker().enabled()) col.masker().rescan(extra_text);
    pipeline::run r;
    r.any_readable = true;
    pipeline::finish(col, r);
    r.total_lines = mx.lines;
    r.total_bytes = mx.bytes;
    for (const auto& [p, t] : files) r.inputs.push_back({t.st.display, t.st.lines, 0});  // "from N input(s)" counts the files followed
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
    if (type == "slow_rank") a.report["alert"]["slow_ranks"] = slow_alert_ranks;
    auto brief_of = [](const pipeline::run& run) {
      std::string b = report::to_brief(run);
      while (!b.empty() && b.back() == '\n') b.pop_back();
      return b;
    };
    if (type == "update") {
      std::string brief = brief_of(r);
      a.text = header(type) + ": " + brief +
               (brief == first_brief ? fmt::format(" ({} collateral group(s) now)", r.diag.collateral.size())
                                     : " (was: " + first_brief + ")");
    } else {
      a.text = header(type) + "\n" + extra_text + report::to_terminal(r, {false});
      if (type == "failure") first_brief = brief_of(r);
    }
    a.initiating_host_key = r.initiating_host_key;
    for (const auto& [p, t] : files) a.inputs += (a.inputs.empty() ? "" : "; ") + t.st.display;
    {
      std::lock_guard<std::mutex> g(mu);
      ++mx.alerts[type];
    }
    a.run = r;
    sink(a);
    return r;
  };

  bool cause_pending = false;  // a cause line was read since the last diagnosis
  auto alert_on_cause = [&]() {
    cause_pending = false;
    auto d = col.diagnose();
    if (d.verdict != correlate::verdict::failure || (alerted_sig && *alerted_sig == d.signature && alerted_rank == d.initiating_rank))
      return;
    auto r = emit(alerted_sig ? "update" : "failure", "");
    alerted_sig = d.signature;
    alerted_rank = d.initiating_rank;
    for (const auto& [p2, t2] : files) alerted_attempt = std::max(alerted_attempt, t2.st.attempt.value_or(0));
    alerted_collateral = r.diag.collateral.size();
    last_update = now_unix();
    pending_update = false;
  };

  // One line through the scan-first path, as diagnose: lines the gate does not hit keep only per-rank facts.
  auto on_line = [&](tracked& t, std::string_view line, std::uint64_t line_no) {
    std::size_t added = col.add_line_gated(t.st, line.substr(0, opt.pipeline.ingest.max_line_bytes), line_no);
    double now = now_unix();
    last_any = now;
    // per-rank activity for silence detection (masked text only)
    writer key = t.st.prev_rank        ? writer{writer::by::rank, *t.st.prev_rank, {}}
                 : t.st.hint.rank       ? writer{writer::by::rank, *t.st.hint.rank, {}}
                 : t.st.hint.local_rank ? writer{writer::by::local_rank, *t.st.hint.local_rank, {}}
                                        : writer{writer::by::file, 0, t.st.display};
    last_line_at[key] = now;
    auto& ll = last_line_of[key];
    ll.text = t.st.last_body;
    ll.raw = t.st.last_body_raw;
    hang_reported.erase(key);
    all_silent_reported = false;
    {
      std::lock_guard<std::mutex> g(mu);
      ++mx.lines;
      mx.last_line_at[key] = now;
      const auto& fs_ = col.inputs().findings;
      for (std::size_t i = fs_.size() - added; i < fs_.size(); ++i) {
        const auto& f = fs_[i];
        const auto& s = lib.signatures[static_cast<std::size_t>(f.signature)];
        mx.hits[{s.name, s.kind, f.rank ? std::to_string(*f.rank) : "", f.host.value_or("")}]++;
      }
    }
    if (added == 0) return;
    const auto& fs_ = col.inputs().findings;
    for (std::size_t i = fs_.size() - added; i < fs_.size(); ++i)
      cause_pending |= lib.signatures[static_cast<std::size_t>(fs_[i].signature)].is_cause();
    if (alerted_sig) pending_update = true;
  };

  auto read_file = [&](tracked& t, int fd, bool to_end_only) -> bool {
    bool any = false;
    char buf[1 << 16];
    // at most 4 MiB per file per pass, then let others go; a rotated file is drained to its end
    for (int chunk = 0; to_end_only || chunk < 64; ++chunk) {
      ssize_t n = ::pread(fd, buf, sizeof buf, t.offset);
      if (n <= 0) break;
      t.offset += n;
      any = true;
      {
        std::lock_guard<std::mutex> g(mu);
        mx.bytes += static_cast<std::uint64_t>(n);
      }
      t.partial.append(buf, static_cast<std::size_t>(n));
      std::size_t start = 0;
      for (;;) {
        std::size_t nl = t.partial.find_first_of("\r\n", start);
        if (nl == std::string::npos) break;
        std::string_view line(t.partial.data() + start, nl - start);
        start = nl + 1;
        if (t.partial[nl] == '\r' && start < t.partial.size() && t.partial[start] == '\n') ++start;
        ++t.line_no;
        // CRI records a container runtime split (P ... F) are one line, as ingest::line_reader makes them.
        char cri_stream = 0, cri_tag = 0;
        std::size_t msg = ingest::cri_record(line, &cri_stream, &cri_tag);
        const std::size_t max_line = opt.pipeline.ingest.max_line_bytes;
        if (t.joining) {
          if (msg && cri_stream == t.cri_stream) {
            std::string_view part = line.substr(msg);
            if (t.cri_join.size() < max_line) t.cri_join.append(part.substr(0, max_line - t.cri_join.size()));
            if (cri_tag == 'P') continue;
            t.joining = false;
            on_line(t, t.cri_join, t.cri_line);
            continue;
          }
          t.joining = false;
          on_line(t, t.cri_join, t.cri_line);
        }
        if (msg && cri_tag == 'P') {
          t.joining = true;
          t.cri_stream = cri_stream;
          t.cri_join.assign(line.substr(0, max_line));
          t.cri_line = t.line_no;
          continue;
        }
        on_line(t, line, t.line_no);
      }
      t.partial.erase(0, start);

      // One correlation per chunk read (64 KiB), not one per cause line: a storm of cause lines (every rank
      // printing its own error) costs one diagnosis per chunk, and the alert still follows within the chunk.
      if (cause_pending) alert_on_cause();
      if (t.partial.size() > opt.pipeline.ingest.max_line_bytes) t.partial.clear();  // a runaway line: drop it

    }
    return any;
  };

  auto started = std::chrono::steady_clock::now();
  while (!stop.load()) {
    if (auto st = col.check(); !st) {  // a matching-engine error: stop with an error, never a quiet "no alert"
      if (ino_fd >= 0) ::close(ino_fd);
      return st;
    }
    if (opt.run_for_s && std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() > *opt.run_for_s)
      break;
    discover();
    {
      std::lock_guard<std::mutex> g(mu);
      mx.files = files.size();  // also the readiness signal: set once the first scan has opened them
      mx.ready = true;
    }
    for (auto& [path, t] : files) {
      struct stat sb {};
      bool exists = ::stat(path.c_str(), &sb) == 0;
      if (exists && sb.st_ino != t.ino) {
        // Rotated: finish the old file (still open) to its end, then follow the new one from 0.
        read_file(t, t.fd, true);
        if (!t.partial.empty()) {
          col.add_line(t.st, t.partial, ++t.line_no);
          t.partial.clear();
        }
        ::close(t.fd);
        t.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        t.old_ino = t.ino;
        t.ino = sb.st_ino;
        t.offset = 0;
        {
          std::lock_guard<std::mutex> g(mu);
          ++mx.rotations;
        }
        if (t.fd < 0) continue;
      } else if (exists && sb.st_size < t.offset) {
        t.offset = 0;  // truncated in place (copytruncate): read what was written since
        t.partial.clear();
        std::lock_guard<std::mutex> g(mu);
        ++mx.truncations;
      }
      if (t.fd >= 0) read_file(t, t.fd, false);
    }
    double now = now_unix();
    if (pending_update && now - last_update >= opt.update_interval_s) {
      auto d = col.diagnose();
      if (d.collateral.size() != alerted_collateral) {
        emit("update", "");
        alerted_collateral = d.collateral.size();
      }
      pending_update = false;
      last_update = now;
    }
    // Slow ranks (slow_ranks.hpp): one alert per rank and restart attempt, none once a failure was alerted.
    slow_watch.poll(now, col.inputs(), mx, mu, !alerted_sig, [&](const correlate::slow_rank& s) {
      slow_alert_ranks.assign(1, s.rank);
      emit("slow_rank", detail::slow_rank_text(s));
    });
    // Silence: one rank quiet while others write, or everyone quiet after having written. A rank that
    // failed (a cause line or a non-zero exit) is not hanging, and once a failure was alerted the job's
    // silence is its end, not a hang.
    // After a torchrun restart, the new attempt is watched afresh: only its failures count.
    int cur_attempt = 0;
    for (const auto& [p2, t2] : files) cur_attempt = std::max(cur_attempt, t2.st.attempt.value_or(0));
    const bool failure_alerted = alerted_sig && alerted_attempt >= cur_attempt;
    // The failed ranks are looked up only when a rank has been silent long enough to matter (not every poll).
    std::optional<std::set<int>> failed;  // ranks
    auto has_failed = [&](const writer& key) {
      if (key.kind != writer::by::rank) return false;
      if (!failed) {
        failed.emplace();
        for (const auto& f : col.inputs().findings)
          if (f.rank && f.attempt.value_or(0) == cur_attempt && lib.signatures[static_cast<std::size_t>(f.signature)].is_cause())
            failed->insert(*f.rank);
        for (const auto& e : col.inputs().exits)
          if (e.rank && e.attempt.value_or(0) == cur_attempt && e.exitcode && *e.exitcode != 0)
            failed->insert(*e.rank);
      }
      return failed->count(key.number) > 0;
    };
    if (last_any > 0 && last_line_at.size() > 1 && !failure_alerted) {
      for (const auto& [key, at] : last_line_at) {
        if (now - at <= opt.silence_s || hang_reported.count(key) || has_failed(key)) continue;
        bool others_active = false;
        for (const auto& [k2, at2] : last_line_at) others_active |= (k2 != key && now - at2 < opt.silence_s);
        if (now - at > opt.silence_s && others_active && !hang_reported.count(key)) {
          hang_reported.insert(key);
          std::string extra = "possible hang: " + key.label() + " has written nothing for " + std::to_string(static_cast<int>(now - at)) +
                              " s while other ranks go on; its last line: " + shown(last_line_of[key]) + "\n";
          emit("hang", extra, {key});
        }
      }
    }
    if (last_any > 0 && now - last_any > opt.silence_s && !all_silent_reported && !failure_alerted) {
      all_silent_reported = true;
      std::string extra = "possible hang: every rank has been silent for " + std::to_string(static_cast<int>(now - last_any)) + " s; last lines:\n";
      std::vector<writer> all;
      for (auto& [k, l] : last_line_of) {
        extra += "  " + k.label() + ": " + shown(l) + "\n";
        all.push_back(k);
      }
      emit("hang", extra, all);
    }
    if (ino_fd >= 0) {
      pollfd p{ino_fd, POLLIN, 0};
      if (::poll(&p, 1, opt.poll_ms) > 0) {
        char evbuf[8192];
        while (::read(ino_fd, evbuf, sizeof evbuf) > 0) {
        }
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(opt.poll_ms));
    }
  }
  for (auto& [p, t] : files)
    if (t.fd >= 0) ::close(t.fd);
  if (ino_fd >= 0) ::close(ino_fd);
  return ok();
}

}  // namespace ff::watch
