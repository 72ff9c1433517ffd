// firstfault/stragglers.hpp: per-rank step times and the ranks that are slower than the others.
//
// A rank's step time is measured from its progress lines: the time of the first line that reached a step
// ("step 40", "iteration 40") and of the first line that reached a later one give (t2 - t1) / (s2 - s1)
// seconds a step. A line with no time of its own gives no sample. Each rank keeps its most recent
// samples (step_clock::kKept) so the answer follows what the rank does now, not at start-up.
//
// A rank is slow (a straggler) when its median step time is at least `ratio` times the median of the
// other ranks' medians AND exceeds it by at least `min_gap_s` (docs/ARCHITECTURE.md, "Stragglers").
// Medians make one checkpoint save, evaluation or retried fetch (a single long step) change nothing.
//
// What it can and cannot see: in lock-step data-parallel training every rank waits for the slowest in the
// step's collective, so ranks that print their progress after that collective print it at the same
// moment and have the same step time; the slow rank does not stand out there (the whole job slows down).
// It stands out when ranks step on their own between synchronisations (gradient accumulation under
// DDP no_sync, local SGD, pipeline stages, ranks of separate jobs or data-loading workers that print
// their own steps) or when a rank prints a time it measured itself (not read yet: see the architecture
// notes).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "firstfault/normalize.hpp"

namespace ff::correlate {

struct inputs;

/// One rank's step-time samples. Units: seconds, steps. Not thread-safe (one collector thread). 56 bytes
/// while the rank has no sample (every rank of the inputs has one clock: the memory bound of a million
/// ranks holds), up to kKept samples of 8 bytes once it has.
class step_clock {
 public:
  /// Samples kept per rank (the most recent ones).
  static constexpr std::size_t kKept = 64;
  /// A line of this rank reached `step` at `ts` (its own time; none: no sample). A step lower than the
  /// last one, a clock of another kind or a time going backwards starts over (a restart, a new epoch
  /// counter, two interleaved clocks) without a sample; the same step again changes nothing (several lines
  /// of one step: the first one's time counts).
  void note(long step, const std::optional<normalize::timestamp>& ts);
  /// The weighted median of the kept samples, seconds a step (each sample weighs the steps it covers);
  /// none without a sample.
  std::optional<double> median_seconds() const;
  std::uint64_t steps_timed() const { return steps_; }      ///< steps covered by the kept samples
  std::size_t samples() const { return samples_.size(); }  ///< kept samples (at most kKept)
  bool sub_second() const { return sub_second_; }           ///< a time with a fraction of a second was seen
  std::optional<long> last_step() const { return has_step_ ? std::optional<long>(step_) : std::nullopt; }

 private:
  struct sample {
    float seconds;       // per step
    std::uint16_t steps; // steps it covers (capped at 65,535)
  };
  double at_ = 0;  // the anchor: the step last reached and when
  long step_ = 0;
  std::vector<sample> samples_;  // a ring once full (next_ is the oldest)
  std::uint32_t steps_ = 0;
  std::uint8_t next_ = 0;
  normalize::timestamp::clock kind_ = normalize::timestamp::clock::wall;
  bool has_step_ = false;
  bool sub_second_ = false;
};

/// When a rank counts as slow. Defaults and their reasons: docs/ARCHITECTURE.md, "Stragglers".
struct straggler_rule {
  double ratio = 1.5;           ///< rank median >= ratio x the others' median (3 or more ranks timed)
  double ratio_two = 2.0;       ///< the same with only 2 ranks timed (no majority says which one is normal)
  double min_gap_s = 0.1;       ///< and rank median - others' median >= this many seconds
  double min_gap_coarse_s = 2;  ///< the gap when no timed line had a fraction of a second (1 s clocks)
  std::uint64_t min_steps = 8;  ///< steps a rank must have timed to be compared at all
  std::size_t min_samples = 3;  ///< and samples (intervals between steps)
};

/// A rank whose step time exceeds the others' by the rule's margin.
struct slow_rank {
  int rank = 0;
  bool local = false;                ///< `rank` is a local rank (no global rank was known for its lines)
  std::optional<int> attempt;        ///< the torchrun restart attempt it was measured in
  std::optional<std::string> host;   ///< the rank's host when the lines named one (masked like the report)
  double seconds_per_step = 0;       ///< the rank's median step time
  double others_seconds_per_step = 0;  ///< the median of the other ranks' medians
  std::uint64_t steps = 0;           ///< steps the rank's median covers
  std::optional<long> last_step;     ///< the last step the rank reached
  std::size_t ranks_compared = 0;    ///< ranks with enough steps timed, this one included
  /// "rank 5 (host node-b) 2.90 s/step vs median 1.10 s/step of 7 other ranks over 40 steps"
  std::string describe() const;
};

/// One rank's median step time, as the comparison read it (the input of find_slow_ranks).
struct rank_step_time {
  int rank = 0;
  bool local = false;
  std::optional<int> attempt;
  double seconds_per_step = 0;
  std::uint64_t steps = 0;
  std::optional<long> last_step;
  bool sub_second = false;
};

/// The slow ranks among `timed` (ranks with too few steps or samples must already be left out), slowest
/// first. Empty with fewer than 2 ranks, and when half or more of the ranks would be slow (then there is
/// no majority pace to compare with: two kinds of node, or a job-wide slowdown).
std::vector<slow_rank> find_slow_ranks(const std::vector<rank_step_time>& timed, const straggler_rule& rule = {});

/// The ranks of `in.activity` to compare: those with rule.min_steps and rule.min_samples timed, of the
/// latest restart attempt only, global ranks when any has enough steps, else local ranks.
std::vector<rank_step_time> timed_ranks(const inputs& in, const straggler_rule& rule = {});

/// find_slow_ranks(timed_ranks(in)) with each slow rank's host filled from in.host_ranks (one host only).
std::vector<slow_rank> slow_ranks_of(const inputs& in, const straggler_rule& rule = {});

}  // namespace ff::correlate
