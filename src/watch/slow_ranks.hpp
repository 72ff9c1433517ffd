// Internal to `watch`: the slow ranks a running job has, each alerted once (stragglers.hpp).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "firstfault/correlate.hpp"
#include "firstfault/watch.hpp"

namespace ff::watch::detail {

/// Remembers which slow ranks were alerted: a rank is alerted once per restart attempt, however many lines
/// or checks follow, and again only after a restart.
class slow_rank_watch {
 public:
  struct result {
    std::vector<correlate::slow_rank> fresh;  ///< slow now and not alerted before, slowest first
    std::map<writer, double> step_seconds;    ///< each compared rank's median step time (seconds)
    std::size_t slow = 0;                     ///< ranks slow now (alerted or not)
  };
  /// Compares the ranks' step times in `in` (the collector's inputs; read on the watcher thread).
  result check(const correlate::inputs& in);
  /// The watch loop's hook: at most once a second by `now` (unix seconds), check(), the gauges stored in
  /// `mx` under `mu`, and `alert` called for each newly slow rank when `alerts_on` (off once the job's
  /// failure was alerted: its slow ranks are then the failure's story, not news).
  void poll(double now, const correlate::inputs& in, metrics& mx, std::mutex& mu, bool alerts_on,
            const std::function<void(const correlate::slow_rank&)>& alert);

 private:
  std::set<std::tuple<bool, int, int>> alerted_;  // (local, rank, attempt or -1)
  double last_poll_ = 0;
};

/// The alert's first line: "slow rank: rank 2 (host node-b) 1.20 s/step vs median 0.30 s/step ..."
std::string slow_rank_text(const correlate::slow_rank& s);

}  // namespace ff::watch::detail
