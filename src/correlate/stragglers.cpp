// Per-rank step times and slow ranks (stragglers.hpp). The choice of the rule is explained in
// docs/ARCHITECTURE.md, "Stragglers".
#include "firstfault/stragglers.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "firstfault/correlate.hpp"

namespace ff::correlate {

void step_clock::note(long step, const std::optional<normalize::timestamp>& ts) {
  if (!ts) return;
  const double t = ts->seconds;
  if (!has_step_ || ts->kind != kind_ || step < step_ || t < at_) {
    has_step_ = true;  // start over: no sample across a restart, a counter reset or a clock change
    step_ = step;
    at_ = t;
    kind_ = ts->kind;
    return;
  }
  if (step == step_) return;  // another line of the same step: the step began at the first one
  if (t != std::floor(t)) sub_second_ = true;
  const auto covered = static_cast<std::uint64_t>(step - step_);
  const sample s{static_cast<float>((t - at_) / static_cast<double>(covered)),
                 static_cast<std::uint16_t>(std::min<std::uint64_t>(covered, 65535))};
  if (samples_.size() < kKept) {
    samples_.push_back(s);
  } else {  // the oldest sample leaves the ring
    steps_ -= samples_[next_].steps;
    samples_[next_] = s;
    next_ = static_cast<std::uint8_t>((next_ + 1) % kKept);
  }
  steps_ += s.steps;
  step_ = step;
  at_ = t;
}

std::optional<double> step_clock::median_seconds() const {
  if (samples_.empty()) return std::nullopt;
  sample s[kKept];
  const std::size_t n = samples_.size();
  std::copy(samples_.begin(), samples_.end(), s);
  std::sort(s, s + n, [](const sample& a, const sample& b) { return a.seconds < b.seconds; });
  // The lower weighted median: the first sample at which half of the steps are covered.
  const std::uint64_t half = (static_cast<std::uint64_t>(steps_) + 1) / 2;
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < n; ++i) {
    seen += s[i].steps;
    if (seen >= half) return s[i].seconds;
  }
  return s[n - 1].seconds;
}

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

std::string seconds_text(double s) { return s >= 10 ? fmt::format("{:.1f} s", s) : fmt::format("{:.2f} s", s); }

}  // namespace

std::string slow_rank::describe() const {
  std::string who = (local ? "local rank " : "rank ") + std::to_string(rank);
  if (host) who += " (host " + *host + ")";
  return fmt::format("{} {}/step vs median {}/step of {} other rank{} over {} steps", who, seconds_text(seconds_per_step),
                     seconds_text(others_seconds_per_step), ranks_compared - 1, ranks_compared == 2 ? "" : "s", steps);
}

std::vector<slow_rank> find_slow_ranks(const std::vector<rank_step_time>& timed, const straggler_rule& rule) {
  std::vector<slow_rank> out;
  const std::size_t n = timed.size();
  if (n < 2) return out;
  const bool fine = std::any_of(timed.begin(), timed.end(), [](const rank_step_time& r) { return r.sub_second; });
  const double gap = fine ? rule.min_gap_s : rule.min_gap_coarse_s;
  const double ratio = n == 2 ? rule.ratio_two : rule.ratio;
  std::vector<double> others;
  for (std::size_t i = 0; i < n; ++i) {
    others.clear();
    for (std::size_t j = 0; j < n; ++j)
      if (j != i) others.push_back(timed[j].seconds_per_step);
    const double m = median_of(others), mine = timed[i].seconds_per_step;
    if (mine < ratio * m || mine - m < gap) continue;
    slow_rank s;
    s.rank = timed[i].rank;
    s.local = timed[i].local;
    s.attempt = timed[i].attempt;
    s.seconds_per_step = mine;
    s.others_seconds_per_step = m;
    s.steps = timed[i].steps;
    s.last_step = timed[i].last_step;
    s.ranks_compared = n;
    out.push_back(std::move(s));
  }
  // Stragglers are the exception: with half of the ranks or more "slow" there is no common pace to be
  // slower than (for 2 ranks one slow rank is allowed: ratio_two guards it).
  if (n > 2 && out.size() * 2 >= n) out.clear();
  std::sort(out.begin(), out.end(), [](const slow_rank& a, const slow_rank& b) {
    return a.seconds_per_step != b.seconds_per_step ? a.seconds_per_step > b.seconds_per_step : a.rank < b.rank;
  });
  return out;
}

std::vector<rank_step_time> timed_ranks(const inputs& in, const straggler_rule& rule) {
  // The latest attempt of the ranks that have one (a restarted job is compared as it runs now).
  std::optional<int> last_attempt;
  for (const auto& [key, act] : in.activity)
    if (key.attempt && (!last_attempt || *key.attempt > *last_attempt)) last_attempt = key.attempt;
  std::vector<rank_step_time> global, local;
  for (const auto& [key, act] : in.activity) {
    if (key.attempt != last_attempt) continue;
    const auto& c = act.steps;
    auto med = c.median_seconds();
    if (!med || c.steps_timed() < rule.min_steps || c.samples() < rule.min_samples) continue;
    rank_step_time r{key.number, key.kind == rank_key::scope::local, key.attempt, *med, c.steps_timed(), c.last_step(), c.sub_second()};
    (r.local ? local : global).push_back(r);
  }
  return global.empty() ? local : global;
}

std::vector<slow_rank> slow_ranks_of(const inputs& in, const straggler_rule& rule) {
  auto out = find_slow_ranks(timed_ranks(in, rule), rule);
  for (auto& s : out) {
    if (s.local) continue;
    const std::string* only = nullptr;
    bool several = false;
    for (const auto& [host, ranks] : in.host_ranks) {
      if (!ranks.count(s.rank)) continue;
      several = only != nullptr;
      only = &host;
      if (several) break;
    }
    if (only && !several) s.host = *only;
  }
  return out;
}

}  // namespace ff::correlate
