// `watch`: slow ranks of a running job (slow_ranks.hpp).
#include "watch/slow_ranks.hpp"

#include "firstfault/stragglers.hpp"

namespace ff::watch::detail {

void slow_rank_watch::poll(double now, const correlate::inputs& in, metrics& mx, std::mutex& mu, bool alerts_on,
                           const std::function<void(const correlate::slow_rank&)>& alert) {
  if (now - last_poll_ < 1) return;
  last_poll_ = now;
  auto r = check(in);  // (with alerts off, a rank first slow now is not alerted later either)
  {
    std::lock_guard<std::mutex> g(mu);
    mx.step_seconds = std::move(r.step_seconds);
    mx.slow_ranks = r.slow;
  }
  if (alerts_on)
    for (const auto& s : r.fresh) alert(s);
}

slow_rank_watch::result slow_rank_watch::check(const correlate::inputs& in) {
  result r;
  for (const auto& t : correlate::timed_ranks(in))
    r.step_seconds[writer{t.local ? writer::by::local_rank : writer::by::rank, t.rank, {}}] = t.seconds_per_step;
  auto slow = correlate::slow_ranks_of(in);
  r.slow = slow.size();
  for (auto& s : slow)
    if (alerted_.emplace(s.local, s.rank, s.attempt.value_or(-1)).second) r.fresh.push_back(std::move(s));
  return r;
}

std::string slow_rank_text(const correlate::slow_rank& s) {
  return "slow rank: " + s.describe() + (s.last_step ? ", at step " + std::to_string(*s.last_step) : "") +
         "; the other ranks wait for it at their next collective, which times out if it falls further behind\n";
}

}  // namespace ff::watch::detail
