// The run's outcome against its lines (correlate_rules.hpp): did it end well, and which lines that look like
// failures did it go on past (issue 43, "errors the run survived"). Split from rules.cpp.
#include <algorithm>
#include <cstdlib>

#include "firstfault/correlate_rules.hpp"
#include "firstfault/limits.hpp"
#include "firstfault/text.hpp"
#include "correlate/rules_detail.hpp"

namespace ff::correlate::rules {

// A rank's last progress step comes after line `f`: later on the same clock with both times the lines' own
// (an inherited time says nothing about order across files), or, where a time is missing, later in the same
// file. A same-second time does not order them: a console interleaves a rank's buffered stdout (its step
// lines) after its stderr (the error) though both were written together.
bool step_after(const context& ctx, const rank_activity& act, const finding& f) {
  if (!act.last_step) return false;
  // By time, where both have one: an inherited time (a traceback's, from the timed line before it) is the
  // earliest the line can have been written; a step a second or more after it, stamped with its own time,
  // was written after the line's stream went on. Within a second nothing is ordered.
  // Without times nothing is ordered: print()'s progress lines go to a block-buffered stdout when it is a
  // pipe, so steps written before an error can reach the file after its traceback (stderr is unbuffered).
  const bool timed = f.ts && act.last_step_ts && f.ts->kind == act.last_step_ts->kind;
  const bool later_in_time = timed && act.last_step_ts->seconds >= f.ts->seconds + 1.0;
  // In the same file, later by line order too (a console and the rank's own file hold copies of one line).
  if (ctx.in->source_name(act.last_step_source) == f.source) return later_in_time && act.last_step_line_no > f.line_no;
  return later_in_time;
}

bool any_worker_failed(const context& ctx) {
  return std::any_of(ctx.exits.begin(), ctx.exits.end(), [](const extract::exit_record& e) { return e.failed(); });
}

const inputs::marked_line* ended_well(const context& ctx) {
  if (any_worker_failed(ctx)) return nullptr;
  const auto& ends = ctx.in->success_ends;
  for (const auto& e : ends)
    if (e.job) return &e;
  if (ends.empty()) return nullptr;
  // Every record that wrote a line (by its key as the lines named it: two nodes' local rank 0 are one key)
  // has a line saying it finished.
  // A record is done when a line of its own key said so, or one of the global rank it resolves to (a
  // rank's file named by its local rank, its lines by their global rank).
  std::set<rank_key> done;
  std::set<int> done_global;
  for (const auto& e : ends) {
    if (e.rank) done.insert(rank_key::global_rank(*e.rank));
    if (e.local_rank) done.insert(rank_key::local_rank(*e.local_rank));
    if (auto r = ctx.resolve(e.rank, e.local_rank)) done_global.insert(*r);
  }
  bool any = false;
  for (const auto& [key, act] : ctx.in->activity) {
    if (key.attempt && ctx.in->only_attempt && *key.attempt != *ctx.in->only_attempt) continue;
    any = true;
    if (done.count(rank_key{key.kind, key.number, std::nullopt})) continue;
    auto r = key.kind == rank_key::scope::global ? std::optional<int>(key.number) : ctx.resolve(std::nullopt, key.number);
    if (!r || !done_global.count(*r)) return nullptr;
  }
  return any ? &ends.back() : nullptr;
}

namespace {
// DeepSpeed's dynamic loss scaler grows the scale again only after loss_scale_window (default 1000) steps
// without an overflow (https://www.deepspeed.ai/docs/config-json/#fp16-training-options, Megatron's
// DynamicGradScaler growth_interval likewise): before that, halvings from the initial scale are its search
// for a level that fits; after it, a run of halvings is a reaction to the gradients.
constexpr long kSettlingSteps = 1000;

// A line (where it is, and its time when it has one of its own) came before the run's successful end `end`:
// earlier in the end line's file, or in another file a second or more earlier on the same clock by the end
// line's own time. Untimed lines elsewhere are not ordered against it. The reason the report shows, or "".
std::string before_end(const inputs::marked_line* end, const std::string& source, std::uint64_t line_no,
                       const std::optional<normalize::timestamp>& ts) {
  if (!end) return {};
  const bool before = end->source == source ? end->line_no > line_no
                                            : ts && end->ts && !end->ts_inherited && ts->kind == end->ts->kind && ts->seconds + 1.0 <= end->ts->seconds;
  return before ? "the run ended well after it: \"" + std::string(text::prefix_utf8(end->text, limits::kQuoteBytes)) + "\"" : std::string();
}

// The largest step a progress line of the run (a fact line: its `step` field) stated before line `f`: earlier
// in the same file, or earlier on the same clock by the lines' own times. 0 when none did.
long progress_before(const context& ctx, const finding& f) {
  long best = f.step_at.value_or(0);
  for (const auto& m : ctx.in->fact_lines) {
    const bool before = m.source == f.source ? m.line_no < f.line_no
                                             : m.ts && f.ts && !m.ts_inherited && m.ts->kind == f.ts->kind && m.ts->seconds < f.ts->seconds;
    if (!before) continue;
    for (const auto& [k, v] : m.fields)
      if (k == "step") best = std::max(best, std::strtol(v.c_str(), nullptr, 10));
  }
  return best;
}
}  // namespace

std::map<const finding*, std::string> survived_errors(const context& ctx) {
  std::map<const finding*, std::string> out;
  // The run ended well: a line that says so (a worker group that succeeded, a benchmark's result) and no
  // worker that failed. Lines before it, in another file or earlier in its own, were survived.
  const inputs::marked_line* ended_well = ctx.ended_well;
  // A helper thread that died of an uncaught exception (Python's "Exception in thread NAME:", a signature
  // tagged event.thread_died) on a rank that others then waited for (they timed out, it did not), or that
  // the launcher saw fail: the rank did not get past that error, whatever it printed after it (steps from a
  // queue the thread had filled). A caught and logged exception has no such header.
  std::set<int> thread_died, timed_out, stuck;
  for (const auto& f : ctx.fs) {
    if (f.rank && is_timeout(ctx.sig(f))) timed_out.insert(*f.rank);
    if (f.rank && ctx.sig(f).has_tag("event.thread_died")) thread_died.insert(*f.rank);
  }
  for (int r : thread_died)
    if (!timed_out.empty() && !timed_out.count(r)) stuck.insert(r);
  // A rank the launcher saw exit with an error did not survive anything it printed.
  for (const auto& e : ctx.exits)
    if (e.rank && e.failed()) stuck.insert(*e.rank);
  const auto& waited_on_or_failed = stuck;
  for (const auto& f : ctx.fs) {
    const auto& s = ctx.sig(f);
    if (s.has_tag("event.advisory")) continue;  // after the others (below)
    // Never survived: training on NaN is the failure; nothing follows the scheduler's end; a GPU runtime error
    // (illegal address, device assert) leaves the CUDA context unusable, and a hardware fault stays.
    // A transient the training loop recovers from by itself (tag event.transient: an fp16 overflow skips one
    // step and halves the loss scale; the scale at its floor is another signature) is numerics yet survivable.
    const bool transient = s.has_tag("event.transient");
    if (!transient && (s.category == "numerics" || s.category == "scheduler" || s.category == "gpu_runtime" || s.category == "hardware")) continue;
    // Handled by the log's own word: when the retries run out, the last failure is printed without a notice.
    if (f.handled) {
      out[&f] = "the line before its traceback said the error was handled and would be retried";
      continue;
    }
    // Before the successful end: earlier in its file, or, in another file, earlier on the same clock by a second
    // with the end's own time (an untimed line elsewhere is not ordered against it).
    const std::string ended_after = before_end(ended_well, f.source, f.line_no, f.ts);
    // Why the run is known to have gone past the line, the strongest evidence first; empty: not survived.
    auto why = [&]() -> std::string {
      if (!ended_after.empty()) return ended_after;
      // A transient before the rank's first progress line (overflows while the scale settles, in the first
      // steps) is survived when a rank trained after it, as a rank-less line is (below).
      if (f.rank && !(transient && !f.step_at)) {
        auto it = ctx.activity.find(*f.rank);
        // The rank had made progress before the line and went past it (a step printed before the error
        // and a later one): buffered progress that only reached the file after the error is not later.
        if (it == ctx.activity.end() || !f.step_at || !it->second.last_step || *it->second.last_step <= *f.step_at ||
            !step_after(ctx, it->second, f) || waited_on_or_failed.count(*f.rank))
          return {};
        return "rank " + std::to_string(*f.rank) + " went on to step " + std::to_string(*it->second.last_step) + " after it (it was at step " +
               std::to_string(*f.step_at) + ")";
      }
      // A line of no rank: a start-up message (an agent's store or rendezvous warning) or a symptom (a
      // connection retry) is survived when a rank trained after it. A rank-less cause of another layer (an Xid)
      // may still be what slowly broke the run, and is kept.
      if ((f.local_rank && !transient) || (s.is_cause() && s.category != "launch")) return {};
      // Every record, resolved to a global rank or not (local ranks of several nodes on one host stay local).
      for (const auto& [key, act] : ctx.in->activity) {
        if (key.attempt && ctx.in->only_attempt && *key.attempt != *ctx.in->only_attempt) continue;
        if (!step_after(ctx, act, f)) continue;
        return std::string(key.kind == rank_key::scope::global ? "rank " : "local rank ") + std::to_string(key.number) + " trained to step " +
               std::to_string(*act.last_step) + " after it";
      }
      return {};
    };
    std::string reason = why();
    // A transient whose number is still far from its floor (kb transient_above), in the run's first steps:
    // the loop is settling. Later in a run (a progress line before it at step kSettlingSteps or more) the same
    // halvings are the scaler reacting to a spike, and only training on past them says it was survived.
    if (reason.empty() && transient && settling(ctx, f))
      if (auto x = transient_value(ctx, f); x && *x >= s.transient_above)
        reason = "its " + s.transient_field + " is " + field(f, s.transient_field) + ", still at least " + std::to_string(s.transient_above) +
                 ": the scaler is settling, not collapsing to its floor";
    if (!reason.empty()) out[&f] = std::move(reason);
  }
  // An advisory (tag event.advisory: a note that names no failure) is the cause only of a run that failed with
  // nothing else to explain it. Slurm's task/cgroup prints "Exceeded step memory limit at some point." whenever
  // memory.failcnt is non-zero, page cache reclaimed included, and the step may have ended well (Galaxy's Slurm
  // runner drops the line from jobs that completed); NCCL's INFO line naming the loopback interface is right on
  // a single host (NCCL_SOCKET_IFNAME=lo), and wrong only when peers on other hosts then cannot connect. Decided
  // after the other lines, whose survival says whether the run failed: a failed exit, an error not survived, a
  // line that looks wrong and was not survived.
  const bool failure_shown =
      std::any_of(ctx.exits.begin(), ctx.exits.end(), [](const auto& e) { return e.failed(); }) ||
      std::any_of(ctx.in->suspicious.begin(), ctx.in->suspicious.end(), [&](const suspicious_line& x) { return suspicious_survived(ctx, x).empty(); }) ||
      std::any_of(ctx.fs.begin(), ctx.fs.end(), [&](const finding& g) { return !ctx.sig(g).has_tag("event.advisory") && !out.count(&g); });
  const bool other_cause = std::any_of(ctx.fs.begin(), ctx.fs.end(), [&](const finding& g) {
    return !ctx.sig(g).has_tag("event.advisory") && ctx.sig(g).is_cause() && !out.count(&g);
  });
  for (const auto& f : ctx.fs) {
    if (!ctx.sig(f).has_tag("event.advisory")) continue;
    std::string reason = before_end(ctx.ended_well, f.source, f.line_no, f.ts);
    if (reason.empty() && !failure_shown) reason = "a note that names no failure, and no exit, other error or line that looks wrong shows the run failed";
    if (reason.empty() && other_cause) reason = "a note that names no failure, and another error explains the run";
    if (!reason.empty()) out[&f] = std::move(reason);
  }
  return out;
}

std::string suspicious_survived(const context& ctx, const suspicious_line& s) {
  const std::string& last_source = s.last_source.empty() ? s.source : s.last_source;
  const std::uint64_t last_line = s.last_source.empty() ? s.line_no : s.last_line_no;
  if (auto why = before_end(ctx.ended_well, last_source, last_line, s.last_ts); !why.empty()) return why;
  if (!s.last_ts || s.untimed) return {};
  auto later = [&](const rank_activity& act) {
    return act.last_step && act.last_step_ts && act.last_step_ts->kind == s.last_ts->kind &&
           act.last_step_ts->seconds >= s.last_ts->seconds + 1.0;
  };
  // Lines that named their rank (a global one, or only a local one: torchrun's [defaultN]:) are vouched for
  // by that rank's own later step only; every such rank must have gone on.
  if (!s.ranks.empty() || !s.local_ranks.empty()) {
    long step = 0;
    for (int r : s.ranks) {
      auto it = ctx.activity.find(r);
      if (it == ctx.activity.end() || !later(it->second)) return {};
      step = std::max(step, *it->second.last_step);
    }
    for (int l : s.local_ranks) {
      const rank_activity* a = nullptr;
      for (const auto& [key, act] : ctx.in->activity)
        if (key.kind == rank_key::scope::local && key.number == l && (!key.attempt || !ctx.in->only_attempt || *key.attempt == *ctx.in->only_attempt) &&
            later(act))
          a = &act;
      if (!a) return {};
      step = std::max(step, *a->last_step);
    }
    std::string who = s.ranks.empty() ? "" : (s.ranks.size() == 1 ? "rank " + std::to_string(s.ranks.front()) : "ranks " + text::rank_ranges(s.ranks));
    if (!s.local_ranks.empty())
      who += (who.empty() ? "" : " and ") + std::string(s.local_ranks.size() == 1 ? "local rank " + std::to_string(s.local_ranks.front())
                                                                               : "local ranks " + text::rank_ranges(s.local_ranks));
    return who + " trained to step " + std::to_string(step) + " after it";
  }
  for (const auto& [key, act] : ctx.in->activity) {
    if (key.attempt && ctx.in->only_attempt && *key.attempt != *ctx.in->only_attempt) continue;
    if (!later(act)) continue;
    return std::string(key.kind == rank_key::scope::global ? "rank " : "local rank ") + std::to_string(key.number) + " trained to step " +
           std::to_string(*act.last_step) + " after it";
  }
  return {};
}

bool settling(const context& ctx, const finding& f) { return progress_before(ctx, f) < kSettlingSteps; }

std::optional<double> transient_value(const context& ctx, const finding& f) {
  const auto& s = ctx.sig(f);
  if (s.transient_field.empty()) return std::nullopt;
  const std::string v = field(f, s.transient_field);
  char* end = nullptr;
  const double x = v.empty() ? 0 : std::strtod(v.c_str(), &end);
  if (v.empty() || !end || *end != '\0') return std::nullopt;
  return x;
}

// The ranks of the other failures that torchelastic stamped with the same second as `root` (its "Root Cause
// (first observed failure)" entry). A failure's timestamp is whole seconds (ProcessFailure: int(time.time())
// when the worker left no error file, the error file's int timestamp otherwise) and get_first_failure() is
// min(failures, key=timestamp), which keeps the first of equal keys: SubprocessContext._poll fills the
// failures of one monitor pass in local-rank order, so on a tie the entry is the lowest local rank, not the
// first to fail (torch/distributed/elastic/multiprocessing/errors/__init__.py, ChildFailedError.get_first_failure;
// multiprocessing/api.py, SubprocessContext._poll). The agent's "failed (exitcode: N) local_rank: N" line is
// the same min(). Empty when the entry's time leads every other failure.
// "; a tie-break: ranks 0-1 failed in the same second (...)": what the report adds to a rank taken from such an
// entry when other failures share its second.
std::string tie_note(const extract::exit_record& root, std::set<int> tied) {
  tied.insert(*root.rank);
  return "; a tie-break, not an order: ranks " + text::rank_ranges({tied.begin(), tied.end()}) + " failed in the same second (" +
         root.time + "), and on a tie torchelastic names the lowest local rank; no line of these logs says which failed "
         "first (rerun with --tee 3 or --log_dir for per-rank output)";
}

std::set<int> same_second_failures(const context& ctx, const extract::exit_record& root) {
  std::set<int> tied;
  if (root.time.empty()) return tied;
  for (const auto& e : ctx.exits)
    if (&e != &root && !e.from_agent_line && e.launcher == root.launcher && e.failed() && e.rank && e.rank != root.rank &&
        e.time == root.time && e.attempt == root.attempt)
      tied.insert(*e.rank);
  return tied;
}

}  // namespace ff::correlate::rules
