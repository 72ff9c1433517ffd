// `watch`: slow ranks of a running job (slow_ranks.hpp).
#include "watch/slow_ranks.hpp"

#include "firstfault/stragglers.hpp"

namespace ff::watch::detail {

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
