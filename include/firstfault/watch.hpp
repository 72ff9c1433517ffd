// firstfault/watch.hpp: follow a running job's logs and alert on the first fault.
//
// Follows growing files and new files under directories (inotify wakes the loop; a poll interval is the
// fallback), survives rotation (the old file is read to its end before the new one is opened) and
// truncation/copytruncate (reading restarts at offset 0), and starts at the end of existing files unless
// from_start. Lines are cut by the same line source as `diagnose` (ingest::line_reader, following), so a
// record split across two writes is matched once it is complete, and the same bytes give the same lines
// (CRI records joined, JSON records, '\r' bars). Every line goes through the same collector as `diagnose`
// (masking included). When a cause-role signature fires, an alert carries a full report; updates follow
// as collateral arrives. A rank that stops writing while others go on, or all ranks going silent, for
// longer than `silence_s`, raises a "hang" alert with the last line of each rank. A rank whose step time
// exceeds the other ranks' by the straggler rule's margin (stragglers.hpp) raises one "slow_rank" alert.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "firstfault/pipeline.hpp"

namespace ff::watch {

struct options {
  std::vector<std::string> paths;
  bool from_start = false;
  double silence_s = 300;      ///< seconds without output that count as a possible hang
  int poll_ms = 200;           ///< wake-up interval when inotify is quiet (ms)
  double update_interval_s = 1; ///< at most one "update" alert per interval
  std::optional<double> run_for_s;  ///< stop after this many seconds (tests, cron); default: until stopped
  pipeline::options pipeline;
  /// The run's events (sink.hpp), as diagnose() gives them: begin() as each followed file opens, progress()
  /// after each pass over the files (false ends the watch), and finish() once when the watch ends, with
  /// the run as it stands (what `diagnose` would report of the lines read). Null: none.
  pipeline::sink* events = nullptr;
};

struct alert {
  std::string type;       ///< failure | update | hang | slow_rank
  nlohmann::json report;  ///< same schema as `diagnose --format json`, plus "alert" {type, detected_at_ms}
  std::string text;       ///< terminal rendering
  std::string initiating_host_key;   ///< the history's salted key of the first failing host (options::host_keyer)
  std::string inputs;                ///< the followed files, masked, "; "-separated
  pipeline::run run;                 ///< the run the alert was rendered from (history::entry_of builds the record from it)
};

/// Who wrote a line, for silence detection and the per-rank metric: the stream's rank, else its local
/// rank, else only its file. Ordered by kind, then number, then file.
struct writer {
  enum class by : std::uint8_t { rank, local_rank, file };
  by kind = by::file;
  int number = 0;     ///< the rank or local rank
  std::string file;   ///< the stream's display name (kind file only)
  auto operator<=>(const writer&) const = default;
  std::string label() const;  ///< "rank 3", "local rank 1", or the file name (alert text)
};

/// Counters exported as Prometheus metrics (guarded by the watcher's mutex).
struct metrics {
  std::uint64_t lines = 0, bytes = 0;
  std::map<std::string, std::uint64_t> alerts;  ///< by type
  struct hit_key {  // a struct, so no character of a host name can split it
    std::string signature, kind, rank, host;
    bool operator<(const hit_key& o) const {
      return std::tie(signature, kind, rank, host) < std::tie(o.signature, o.kind, o.rank, o.host);
    }
  };
  std::map<hit_key, std::uint64_t> hits;        ///< matched lines by signature, kind, rank ("" if none), host
  std::map<writer, double> last_line_at;        ///< unix seconds of each writer's last line
  std::size_t files = 0;                        ///< log files followed
  std::uint64_t rotations = 0, truncations = 0; ///< followed files renamed away (then reopened) or cut in place
  bool ready = false;                           ///< the first scan has opened the files (readiness signal)
  /// Step times (stragglers.hpp), refreshed about once a second: each compared rank's median seconds a
  /// step (ranks with too few timed steps are absent), and how many of them are slow now.
  std::map<writer, double> step_seconds;
  std::size_t slow_ranks = 0;
};

/// Runs until `stop` is set or run_for_s elapses. `sink` receives every alert (from the watcher thread);
/// `snapshot` is called with the metrics under a lock whenever they change (may be null).
status run(const pipeline::engine& eng, const options& opt, const std::function<void(const alert&)>& sink,
           const std::atomic<bool>& stop, metrics* shared = nullptr, std::mutex* shared_mu = nullptr);

/// Prometheus text exposition of the metrics (https://prometheus.io/docs/instrumenting/exposition_formats/).
std::string to_prometheus(const metrics& m, double now_unix);

}  // namespace ff::watch
